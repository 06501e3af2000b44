import { EventEmitter } from 'node:events';
import { performance } from 'node:perf_hooks';
import { backOff } from 'exponential-backoff';
import { InvalidOptionError, ResultTooLargeError, StoreUnavailableError } from '../errors';
import { fingerprint as computeFingerprint, type Payload } from '../fingerprint';
import type { RecordId } from '../keys';
import type {
  AcquiredReply,
  ClaimOptions,
  ClaimReply,
  IdempotencyStore,
  WriteReply,
} from '../store/idempotency-store';
import type { EventSubject, IdempotencyEvents } from './events';
import { LeaseKeeper } from './lease-keeper';
import {
  checkRunOverrides,
  type IdempotencyOptions,
  type ResolvedIdempotencyOptions,
  resolveOptions,
} from './options';
import { decodeResult, encodeResult } from './result-codec';
import type { ExecutionResult, RunResult } from './run-result';

/** One operation to run: its scope and idempotency key, and optionally its payload. */
export interface RunRequest extends RecordId {
  /**
   * The payload, fingerprinted (SHA-256) so that the same key with another payload is a
   * `PAYLOAD_MISMATCH`. Omit it, or pass `fingerprint`, when the payload should not be compared.
   */
  readonly payload?: Payload;
  /** A precomputed fingerprint (SHA-256 hex); takes precedence over `payload`. */
  readonly fingerprint?: string;
}

/** What a handler receives. */
export interface HandlerContext {
  readonly scope: string;
  readonly key: string;
  /**
   * The claim's fencing token: it grows with every claim of the key. Make downstream writes conditional
   * on it (reject a write whose token is lower than the last one seen) to fence off a stalled worker.
   */
  readonly fencingToken: number;
  /** Which attempt this is, 1 for the first. */
  readonly attempt: number;
  /**
   * `ACQUIRED_STALE` when an earlier worker's lease expired mid-handler: its side effect may be partial.
   * `UNPROTECTED` when the store did not answer and `storeFailureMode` is `open`: no claim is held, the
   * fencing token and attempt are 0, and a duplicate may run concurrently.
   */
  readonly outcome: 'ACQUIRED' | 'ACQUIRED_STALE' | 'UNPROTECTED';
  /** Aborts with a `LeaseLostError` when the claim is lost; pass it to I/O that accepts a signal. */
  readonly signal: AbortSignal;
}

/** The operation itself. Its resolved value is stored (see `maxResultBytes`) and replayed to duplicates. */
export type Handler<T> = (context: HandlerContext) => Promise<T> | T;

/** Per-call options of {@link Idempotency.run} and {@link Idempotency.execute}. */
export interface RunOptions {
  /** Overrides the runner's `leaseMs` for this call, in milliseconds. */
  readonly leaseMs?: number;
  /** Overrides the runner's `maxAttempts` for this call. */
  readonly maxAttempts?: number;
  /**
   * Called after every successful lease extension, so an adapter can extend the broker's timer with it
   * (SQS visibility, Kafka heartbeat). Errors it throws are emitted as `storeError` (operation
   * `onHeartbeat`) and otherwise ignored.
   */
  readonly onHeartbeat?: (info: { leaseExpiresAtMs: number; serverTimeMs: number }) => void | Promise<void>;
}

/**
 * Runs operations at most once per idempotency key, on an {@link IdempotencyStore}
 * (DESIGN.md, "The record and its states"):
 *
 * 1. claim the key (one atomic script): `ACQUIRED`/`ACQUIRED_STALE` run the handler; `DUPLICATE` replays
 *    the stored result; `CONFLICT`, `PAYLOAD_MISMATCH` and `FAILED` run nothing;
 * 2. while the handler runs, extend the lease every `heartbeatIntervalMs` (the handler's `signal` aborts
 *    when the claim is lost);
 * 3. handler returned: complete with its result; threw a retryable error before `maxAttempts`: release;
 *    otherwise: fail (terminal).
 *
 * Handler errors never reject `run`; they come back as a result. `run` rejects only with
 * `StoreUnavailableError` (the store did not answer a claim and `storeFailureMode` is `closed`),
 * `UnexpectedReplyError`, `InvalidKeyError` or `InvalidOptionError`.
 *
 * @example
 * ```ts
 * const idempotency = new Idempotency({ store }, { leaseMs: 30_000, maxAttempts: 5 });
 * const r = await idempotency.run({ scope: 'payments', key: msg.id, payload: msg.body }, async ({ fencingToken }) =>
 *   charge(msg, fencingToken));
 * if (r.outcome === 'DUPLICATE') console.log('already charged', r.result);
 * ```
 */
export class Idempotency extends EventEmitter<IdempotencyEvents> {
  /** The resolved options (defaults applied). */
  readonly options: ResolvedIdempotencyOptions;
  /** The store records live in. */
  readonly store: IdempotencyStore;

  /** @throws {@link InvalidOptionError} when an option is out of range or `store` is missing. */
  constructor(dependencies: { store: IdempotencyStore }, options: IdempotencyOptions = {}) {
    super({ captureRejections: false });
    if (!dependencies?.store) throw new InvalidOptionError('Idempotency needs { store }');
    this.store = dependencies.store;
    this.options = resolveOptions(options);
  }

  /**
   * Claims, runs and records one operation. See the class description for the steps and
   * {@link RunResult} for every result.
   */
  async run<T>(request: RunRequest, handler: Handler<T>, options: RunOptions = {}): Promise<RunResult<T>> {
    let reply: ClaimReply;
    try {
      reply = await this.claim(request, options);
    } catch (error) {
      if (!(error instanceof StoreUnavailableError) || this.options.storeFailureMode !== 'open') throw error;
      return this.#runUnprotected(request, handler, error);
    }
    if (reply.outcome === 'ACQUIRED' || reply.outcome === 'ACQUIRED_STALE') {
      return this.execute(request, reply, handler, options);
    }
    return this.settle<T>(reply);
  }

  /**
   * Claims one key (lua/claim.lua) and emits `outcome`.
   * @throws {@link StoreUnavailableError} when the store does not answer (whatever `storeFailureMode`).
   */
  async claim(request: RunRequest, options: RunOptions = {}): Promise<ClaimReply> {
    const claimOptions = this.#claimOptions(request, options);
    const reply = await this.#store('claim', request, () => this.store.claim(request, claimOptions));
    this.#emitOutcome(request, reply);
    return reply;
  }

  /**
   * Claims many keys in one round trip (`IdempotencyStore.claimMany`), for batch consumers. Replies come
   * in request order; each then goes to {@link Idempotency.execute} or {@link Idempotency.settle}.
   * @throws {@link StoreUnavailableError} when the store does not answer.
   */
  async claimMany(requests: readonly RunRequest[], options: RunOptions = {}): Promise<ClaimReply[]> {
    const batch = requests.map((r) => ({
      id: { scope: r.scope, key: r.key },
      options: this.#claimOptions(r, options),
    }));
    const replies = await this.#store('claimMany', undefined, () => this.store.claimMany(batch));
    for (const [i, reply] of replies.entries()) this.#emitOutcome(requests[i]!, reply);
    return replies;
  }

  /**
   * Turns a claim reply whose handler must not run (DUPLICATE, CONFLICT, PAYLOAD_MISMATCH, FAILED) into
   * its result; DUPLICATE's stored result is decoded.
   * @throws {@link InvalidOptionError} when given an ACQUIRED reply (use {@link Idempotency.execute}).
   */
  settle<T>(reply: ClaimReply): Exclude<RunResult<T>, ExecutionResult<T> | { outcome: 'UNPROTECTED' }> {
    const base = { fencingToken: reply.fencingToken, attempt: reply.attempt };
    switch (reply.outcome) {
      case 'DUPLICATE':
        return {
          outcome: 'DUPLICATE',
          ...base,
          result: decodeResult<T>(reply.result),
          hasResult: reply.result !== undefined,
          completedAtMs: reply.completedAtMs,
        };
      case 'CONFLICT':
        return { outcome: 'CONFLICT', ...base, retryAfterMs: reply.remainingLeaseMs };
      case 'PAYLOAD_MISMATCH':
        return { outcome: 'PAYLOAD_MISMATCH', ...base, state: reply.state };
      case 'FAILED':
        return { outcome: 'FAILED', ...base, error: reply.error };
      default:
        throw new InvalidOptionError(
          `settle() takes a reply whose handler must not run, got ${reply.outcome}`,
        );
    }
  }

  /**
   * Runs the handler of a claim this worker holds, keeping the lease alive, and records how it ended
   * (complete, release or fail, each fenced by the claim's token). Never rejects because of the handler.
   */
  async execute<T>(
    request: RecordId,
    claim: AcquiredReply,
    handler: Handler<T>,
    options: RunOptions = {},
  ): Promise<ExecutionResult<T>> {
    checkRunOverrides(options);
    const id: RecordId = { scope: request.scope, key: request.key };
    const subject: EventSubject = id;
    const { fencingToken, attempt, outcome } = claim;
    const leaseMs = options.leaseMs ?? this.options.leaseMs;
    const keeper = new LeaseKeeper(
      this.store,
      id,
      fencingToken,
      {
        leaseMs,
        retentionMs: this.options.retentionMs,
        heartbeatIntervalMs: Math.min(this.options.heartbeatIntervalMs, Math.max(1, Math.floor(leaseMs / 3))),
      },
      {
        onExtended: options.onHeartbeat && ((r) => this.#onHeartbeat(options, r, subject)),
        onLost: (during) => this.#emit('leaseLost', { ...subject, fencingToken, during }),
        onStoreError: (error) => this.#emit('storeError', { operation: 'extend', error, subject }),
      },
    );
    const started = performance.now();
    keeper.start();
    let value: T | undefined;
    let thrown: { error: unknown } | undefined;
    try {
      value = await handler({ ...id, fencingToken, attempt, outcome, signal: keeper.signal });
    } catch (error) {
      thrown = { error };
    } finally {
      await keeper.stop();
    }
    const durationMs = performance.now() - started;
    const base = { outcome, fencingToken, attempt } as const;

    if (!thrown) {
      let encoded: ReturnType<typeof encodeResult>;
      try {
        encoded = encodeResult(value, this.options);
      } catch (error) {
        encoded = { kind: 'too-large', bytes: Number.NaN };
        thrown = {
          error: new ResultTooLargeError('The handler result cannot be serialized as JSON', { cause: error }),
        };
      }
      if (encoded.kind === 'too-large' && !thrown) {
        if (this.options.onResultTooLarge === 'omit') {
          this.#emit('resultOmitted', {
            ...subject,
            bytes: encoded.bytes,
            maxResultBytes: this.options.maxResultBytes,
          });
        } else {
          thrown = {
            error: new ResultTooLargeError(
              `The handler result is ${encoded.bytes} bytes encoded; maxResultBytes is ${this.options.maxResultBytes}`,
            ),
          };
        }
      }
      if (!thrown) {
        const result = encoded.kind === 'stored' ? encoded.value : undefined;
        const write = await this.#write('complete', subject, fencingToken, () =>
          this.store.complete(id, fencingToken, { retentionMs: this.options.retentionMs, result }),
        );
        if (write === 'lost') {
          this.#emit('leaseLost', { ...subject, fencingToken, during: 'write' });
          return { ...base, status: 'lease-lost', handlerCompleted: true, result: value, error: undefined };
        }
        const recorded = write === 'ok';
        this.#emit('completed', { ...subject, attempt, fencingToken, durationMs, recorded });
        return { ...base, status: 'completed', result: value as T, recorded };
      }
    }

    const error = thrown.error;
    const reason =
      error instanceof ResultTooLargeError
        ? 'result-too-large'
        : !this.options.isRetryable(error)
          ? 'non-retryable'
          : attempt >= (options.maxAttempts ?? this.options.maxAttempts)
            ? 'attempts-exhausted'
            : undefined;
    if (reason === undefined) {
      const write = await this.#write('release', subject, fencingToken, () =>
        this.store.release(id, fencingToken, { retentionMs: this.options.retentionMs }),
      );
      if (write === 'lost') {
        this.#emit('leaseLost', { ...subject, fencingToken, during: 'write' });
        return { ...base, status: 'lease-lost', handlerCompleted: false, result: undefined, error };
      }
      this.#emit('released', { ...subject, attempt, fencingToken, error, recorded: write === 'ok' });
      return { ...base, status: 'released', error, recorded: write === 'ok' };
    }
    const write = await this.#write('fail', subject, fencingToken, () =>
      this.store.fail(id, fencingToken, {
        retentionMs: this.options.retentionMs,
        error: describeError(error),
      }),
    );
    if (write === 'lost') {
      this.#emit('leaseLost', { ...subject, fencingToken, during: 'write' });
      return {
        ...base,
        status: 'lease-lost',
        handlerCompleted: reason === 'result-too-large',
        result: undefined,
        error,
      };
    }
    this.#emit('failed', { ...subject, attempt, fencingToken, error, reason, recorded: write === 'ok' });
    return { ...base, status: 'failed', error, reason, recorded: write === 'ok' };
  }

  #claimOptions(request: RunRequest, options: RunOptions): ClaimOptions {
    checkRunOverrides(options);
    const fp =
      request.fingerprint ??
      (request.payload === undefined ? undefined : computeFingerprint(request.payload));
    return {
      leaseMs: options.leaseMs ?? this.options.leaseMs,
      retentionMs: this.options.retentionMs,
      fingerprint: fp,
      maxAttempts: options.maxAttempts ?? this.options.maxAttempts,
    };
  }

  async #runUnprotected<T>(
    request: RunRequest,
    handler: Handler<T>,
    storeError: StoreUnavailableError,
  ): Promise<RunResult<T>> {
    this.#emit('failOpen', { scope: request.scope, key: request.key, error: storeError });
    const context = {
      scope: request.scope,
      key: request.key,
      fencingToken: 0,
      attempt: 0,
      outcome: 'UNPROTECTED' as const,
      signal: new AbortController().signal,
    };
    try {
      return { outcome: 'UNPROTECTED', status: 'completed', result: await handler(context), storeError };
    } catch (error) {
      return { outcome: 'UNPROTECTED', status: 'threw', error, storeError };
    }
  }

  /** Calls the store once, emitting `storeError` on failure (which is rethrown). */
  async #store<R>(operation: string, subject: EventSubject | undefined, call: () => Promise<R>): Promise<R> {
    try {
      return await call();
    } catch (error) {
      this.#emit('storeError', {
        operation,
        error,
        subject: subject && { scope: subject.scope, key: subject.key },
      });
      throw error;
    }
  }

  /**
   * A write after the handler, tried `writeAttempts` times while the store is unavailable (the claim is
   * still ours: nobody else can claim while the store is down). 'unrecorded' when every try failed.
   */
  async #write(
    operation: 'complete' | 'release' | 'fail',
    subject: EventSubject,
    fencingToken: number,
    call: () => Promise<WriteReply>,
  ): Promise<'ok' | 'lost' | 'unrecorded'> {
    try {
      const reply = await backOff(() => this.#store(operation, subject, call), {
        numOfAttempts: this.options.writeAttempts,
        startingDelay: 100,
        maxDelay: 2000,
        jitter: 'full',
        retry: (error) => error instanceof StoreUnavailableError,
      });
      if (reply.ok) return 'ok';
      // A try that timed out on our side may still have been applied by the store; the retry then finds
      // the record already in the target state under our own token (only this claim holds that token).
      return reply.currentFencingToken === fencingToken && reply.state === WRITE_TARGET[operation]
        ? 'ok'
        : 'lost';
    } catch (error) {
      if (error instanceof StoreUnavailableError) return 'unrecorded';
      throw error;
    }
  }

  async #onHeartbeat(
    options: RunOptions,
    reply: { leaseExpiresAtMs: number; serverTimeMs: number },
    subject: EventSubject,
  ): Promise<void> {
    try {
      await options.onHeartbeat!({
        leaseExpiresAtMs: reply.leaseExpiresAtMs,
        serverTimeMs: reply.serverTimeMs,
      });
    } catch (error) {
      this.#emit('storeError', { operation: 'onHeartbeat', error, subject });
    }
  }

  #emitOutcome(request: RecordId, reply: ClaimReply): void {
    this.#emit('outcome', {
      scope: request.scope,
      key: request.key,
      outcome: reply.outcome,
      attempt: reply.attempt,
      fencingToken: reply.fencingToken,
    });
  }

  /** Emits an event; a listener that throws cannot change the outcome. */
  #emit<K extends keyof IdempotencyEvents>(name: K, ...payload: IdempotencyEvents[K]): void {
    if (this.listenerCount(name) === 0) return;
    try {
      (this.emit as (n: K, ...p: IdempotencyEvents[K]) => boolean)(name, ...payload);
    } catch {
      // A listener's bug must not turn a completed operation into a failed one.
    }
  }
}

/** The state each fenced write leaves the record in. */
const WRITE_TARGET = { complete: 'COMPLETED', release: 'RELEASED', fail: 'FAILED' } as const;

/** A short description of a handler error for the FAILED record: `Name: message`, at most 1000 chars. */
export function describeError(error: unknown): string {
  const e = error as { name?: unknown; message?: unknown; code?: unknown } | null;
  const text =
    e && typeof e === 'object'
      ? `${String(e.name ?? 'Error')}${e.code ? ` [${String(e.code)}]` : ''}: ${String(e.message ?? '')}`
      : String(error);
  return text.slice(0, 1000);
}
