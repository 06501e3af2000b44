import { EventEmitter } from 'node:events';
import { performance } from 'node:perf_hooks';
import { backOff } from 'exponential-backoff';
import {
  HandlerTimeoutError,
  type IdempotencyErrorCode,
  InvalidKeyError,
  InvalidOptionError,
  isIdempotencyError,
  ReplicationTimeoutError,
  ResultTooLargeError,
  StoreUnavailableError,
  type UnreadableResultError,
  type WrittenClaim,
} from '../errors';
import { checkFingerprint, fingerprint as computeFingerprint, type Payload } from '../fingerprint';
import type { RecordId } from '../keys';
import { heartbeatIntervalFor } from '../kit/heartbeat';
import { emitIsolated } from '../kit/isolate';
import { LongTimeout } from '../kit/long-timeout';
import type { RunOverrides } from '../kit/run-overrides';
import type {
  AcquiredReply,
  ClaimOptions,
  ClaimReply,
  ExtendReply,
  IdempotencyStore,
  StartReply,
  WriteReply,
} from '../store/idempotency-store';
import { unrunReleaseOptions } from '../store/unrun-release';
import { completeClaim } from './complete-claim';
import type { EventSubject, IdempotencyEvents } from './events';
import { type HandlerContext, LazySignalContext } from './handler-context';
import { LeaseKeeper, type LeaseKeeperCallbacks } from './lease-keeper';
import { checkLeaseRenewal, type LeaseRenewal, renewalOf } from './lease-renewal';
import { attachLogger, consoleLogger, type IdempotencyLogger } from './logger';
import {
  checkRunOptions,
  type IdempotencyOptions,
  type ResolvedIdempotencyOptions,
  resolveOptions,
} from './options';
import { decodeDuplicateResult, encodeResult } from './result-codec';
import type { CompletedResult, ExecutionResult, LeaseLostResult, RunResult } from './run-result';

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

/** The operation itself. Its resolved value is stored (see `maxResultBytes`) and replayed to duplicates. */
export type Handler<T> = (context: HandlerContext) => Promise<T> | T;

/**
 * Per-call options of {@link Idempotency.run} and {@link Idempotency.execute}: the overrides of the runner's
 * `leaseMs`, `maxAttempts`, `conflictWaitMs` and `handlerTimeoutMs` (`RunOverrides`, shared with the
 * adapters' options), and what only a call has.
 */
export interface RunOptions extends RunOverrides {
  /**
   * Ends a wait for the holder's outcome early (`conflictWaitMs`); the result is then CONFLICT. Must be an
   * `AbortSignal` (`InvalidOptionError` otherwise).
   */
  readonly signal?: AbortSignal;
  /**
   * Called after every successful lease extension, so an adapter can extend the broker's timer with it
   * (SQS visibility, Kafka heartbeat). Errors it throws are emitted as `storeError` (operation
   * `onHeartbeat`) and otherwise ignored. A promise it returns is awaited before the next extension and
   * before the write after the handler: start a broker call that may hang without returning its promise.
   */
  readonly onHeartbeat?: (info: { leaseExpiresAtMs: number; serverTimeMs: number }) => void | Promise<void>;
  /**
   * Called by {@link Idempotency.execute} (and `run`) once the handler returned within `handlerTimeoutMs`,
   * before its outcome is written: a batch consumer may start the next message's handler while this one's
   * completion is in flight (the Kafka adapter's `idempotentEachBatch`). Not called when the handler threw
   * or timed out. Errors it throws are ignored.
   */
  readonly onHandlerReturned?: () => void;
}

/** Options of {@link Idempotency.execute}: a run's options, and what the caller knows of the claim's lease. */
export interface ExecuteOptions extends RunOptions {
  /**
   * The last renewal of the claim's lease that the store confirmed since the claim, made by whoever kept
   * the claim alive while it waited: `LeaseKeeperSet.take` hands over its last successful extension. The
   * lease then counts to the later of the claim's own end and `sentAt + leaseMs` (from when that extension
   * was sent, never from its reply), so a claim the set renewed a moment ago is not renewed again before
   * its handler. Only a renewal the store answered `ok` for this claim may be passed (a later end than
   * the store holds delays the first heartbeat past what the lease allows); one naming another fencing
   * token than the claim's is refused. Ignored for a
   * reservation (its `start` renews the lease from now). @defaultValue none: the lease counts from the claim
   */
  readonly renewedLease?: LeaseRenewal;
}

/**
 * Runs operations at most once per idempotency key, on an {@link IdempotencyStore}
 * (docs/design.md#the-record-and-its-states):
 *
 * 1. claim the key (one atomic script): `ACQUIRED`/`ACQUIRED_STALE` run the handler; `DUPLICATE` replays
 *    the stored result; `CONFLICT` waits up to `conflictWaitMs` for the holder's outcome (then DUPLICATE,
 *    FAILED, or a claim of its own after a release), else runs nothing; `PAYLOAD_MISMATCH` and `FAILED`
 *    run nothing;
 * 2. while the handler runs, extend the lease every `heartbeatIntervalMs` (the handler's `signal` aborts
 *    when the claim is lost);
 * 3. handler returned: complete with its result; threw a retryable error before `maxAttempts`: release;
 *    otherwise: fail (terminal).
 *
 * With `storeFailureMode: 'open'`, a claim the store did not answer runs the handler unprotected
 * (`UNPROTECTED`, `failOpen`); a claim it had written anyway (`StoreUnavailableError.writtenClaim`) is then
 * released abandoned, so the next claim is `ACQUIRED_STALE`. Failing closed, such a claim is given back
 * unrun (no attempt spent) before `run` rejects, so the redelivery can claim the key at once.
 *
 * A store that stops answering during the `conflictWaitMs` wait runs nothing, whatever
 * `storeFailureMode` (the holder may still be running: no `failOpen`): `run` resolves the CONFLICT it
 * had. Unless the wait had written a claim of its own (the holder let go, and the claim's `WAIT` or
 * `start` went unanswered) that {@link Idempotency.waitForOutcome} could not give back either: `run`
 * then rejects with the `StoreUnavailableError` naming it (`writtenClaim`), for the caller to give back
 * (`Idempotency.giveBack`, the kit's `giveBackUnrun`); resolving CONFLICT dropped it, and it held the key
 * until its lease lapsed.
 *
 * Handler errors never reject `run`; they come back as a result. `run` rejects only with
 * `StoreUnavailableError` (the store did not answer a claim and `storeFailureMode` is `closed`; or,
 * whatever `storeFailureMode`, it did not answer the one `extend` of a claim with less than one
 * heartbeat interval of its lease left when the handler was to start, e.g. after a long conflict wait,
 * or a conflict wait left a claim written that it could not give back: nothing ran),
 * `UnexpectedReplyError` (its subclass `UnreadableResultError` for a DUPLICATE, also after a conflict
 * wait, whose stored result this version cannot decode: the operation completed, no handler ran),
 * `InvalidKeyError` (the request), `InvalidOptionError` (an option, or a handler
 * that is not a function) or `InvalidPayloadError` (a payload that cannot be fingerprinted, a
 * `fingerprint` that is not 64 hex characters); the last three before the store is touched. Anything a
 * handler throws, whatever it is, is described safely and the record released or failed.
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
  /**
   * Where this runner's warnings go (`dependencies.logger`, console by default), `false` for none; an
   * adapter reads it to avoid logging the same warning twice.
   */
  readonly logger: IdempotencyLogger | false;
  /**
   * When each claim reply this runner received was requested (`performance.now()`): its lease started no
   * earlier, so `execute` counts the lease from there (a claim held in a batch has less left).
   */
  readonly #requestedAt = new WeakMap<ClaimReply, number>();
  /** The claim options of a call without overrides or fingerprint (frozen; see #claimOptions). */
  readonly #defaultClaimOptions: ClaimOptions;
  /** What every run's lease keeper reports to (one object for all runs; the keeper carries the call's options). */
  readonly #keeperCallbacks: LeaseKeeperCallbacks<RunOptions> = {
    onExtended: (keeper, reply) =>
      keeper.context.onHeartbeat ? this.#onHeartbeat(keeper.context, reply, keeper.id) : undefined,
    onLost: (keeper, during) =>
      this.#emit('leaseLost', {
        scope: keeper.id.scope,
        key: keeper.id.key,
        fencingToken: keeper.fencingToken,
        during,
      }),
    onStoreError: (keeper, error) =>
      this.#emit('storeError', { operation: 'extend', error, subject: keeper.id }),
  };

  /**
   * @param dependencies.store - where records live.
   * @param dependencies.logger - where warnings a person must not miss go (lease lost, result omitted,
   *   store unavailable and recovered; see runner/logger.ts): any `{ warn, error, info?, debug? }` such as
   *   console, pino or winston; `false` for none. @defaultValue console
   * @throws {@link InvalidOptionError} when an option is out of range or `store` is missing.
   */
  constructor(
    dependencies: { store: IdempotencyStore; logger?: IdempotencyLogger | false },
    options: IdempotencyOptions = {},
  ) {
    super({ captureRejections: false });
    if (!dependencies?.store) throw new InvalidOptionError('Idempotency needs { store }');
    this.store = dependencies.store;
    this.options = resolveOptions(options);
    this.#defaultClaimOptions = Object.freeze({
      leaseMs: this.options.leaseMs,
      retentionMs: this.options.retentionMs,
      fingerprint: undefined,
      maxAttempts: this.options.maxAttempts,
    });
    const logger = dependencies.logger ?? consoleLogger;
    this.logger = logger;
    if (logger) attachLogger(this, logger);
  }

  /**
   * Claims, runs and records one operation. See the class description for the steps and
   * {@link RunResult} for every result.
   * @throws {@link StoreUnavailableError} when the store does not answer: the claim (`storeFailureMode:
   *   'closed'`; a claim it had written is given back unrun first, and the error still names it as
   *   `writtenClaim` only when that give-back went unanswered too), the one `extend` of a claim whose lease
   *   ran short before its handler (whatever `storeFailureMode`; the claim is given back the same way), or,
   *   whatever `storeFailureMode`, the
   *   `conflictWaitMs` wait after it had written a claim of its own whose give-back went unanswered too
   *   (`writtenClaim` set: give it back with {@link Idempotency.giveBack} or the kit's `giveBackUnrun`). A
   *   wait that wrote no claim, or gave it back, resolves the CONFLICT it had. No handler ran in any case.
   * @throws {@link UnreadableResultError} for a DUPLICATE whose stored result cannot be decoded (see
   *   {@link Idempotency.resultOf}).
   * @throws `UnexpectedReplyError`, `InvalidKeyError`, `InvalidOptionError`, `InvalidPayloadError`: see the
   *   class description.
   */
  async run<T>(
    request: RunRequest,
    handler: Handler<T>,
    options: RunOptions = NO_OPTIONS,
  ): Promise<RunResult<T>> {
    checkHandler(handler);
    let reply: ClaimReply;
    let requestedAt: number | undefined;
    try {
      // Not through claim(): run knows when it asked, so the WeakMap that claim() fills for a later
      // execute() (an allocation the GC pays for on every message) is skipped here.
      requestedAt = performance.now();
      reply = await this.#claim(request, options);
    } catch (error) {
      if (!(error instanceof StoreUnavailableError) || this.options.storeFailureMode !== 'open') {
        throw await this.#giveBackWritten(request, error);
      }
      return this.#runUnprotected(request, handler, error);
    }
    if (reply.outcome === 'CONFLICT' && (options.conflictWaitMs ?? this.options.conflictWaitMs) > 0) {
      // A store that stops answering during the wait leaves the CONFLICT as it was: nothing runs, whatever
      // storeFailureMode (the holder may be running). Unless the wait had written a claim of its own that
      // waitForOutcome could not give back either: that rejects, naming it, for the caller to give back.
      reply = await this.waitForOutcome(request, options).catch((error: unknown) => {
        if (error instanceof StoreUnavailableError && error.writtenClaim === undefined) return reply;
        throw error;
      });
      requestedAt = this.#requestedAt.get(reply);
    }
    if (reply.outcome === 'ACQUIRED' || reply.outcome === 'ACQUIRED_STALE') {
      // run owns the claim: one whose start the store did not answer is given back before run rejects.
      return this.#execute(request, reply, handler, options, requestedAt, undefined, true);
    }
    return this.resultOf<T>(reply);
  }

  /**
   * After a CONFLICT: waits up to `conflictWaitMs` (this call's, else the runner's) for the holder's
   * outcome (`IdempotencyStore.waitForOutcome`) and emits `outcome` for the reply it ends with: DUPLICATE,
   * FAILED, PAYLOAD_MISMATCH, ACQUIRED/ACQUIRED_STALE (this caller now holds the claim: pass it to
   * {@link Idempotency.execute}), or CONFLICT when the bound passes. For adapters that claimed with
   * {@link Idempotency.claimMany}; {@link Idempotency.run} calls it by itself. With `reserve: true` (a
   * batch, like `claimMany`'s default) a claim the wait ends with is a reservation: its attempt counts when
   * `execute` starts it, and giving it back with {@link Idempotency.giveBack} costs none.
   * @throws {@link StoreUnavailableError} when the store does not answer; a claim the store had written
   *   (`writtenClaim`) was given back unrun first (see {@link Idempotency.claim}), and the error still
   *   names it only when that give-back went unanswered too ({@link Idempotency.run} then rejects with it).
   */
  async waitForOutcome(
    request: RunRequest,
    options: RunOptions & { readonly reserve?: boolean } = {},
  ): Promise<ClaimReply> {
    const claimOptions = { ...this.#claimOptions(request, options), reserve: options.reserve === true };
    const timeoutMs = options.conflictWaitMs ?? this.options.conflictWaitMs;
    const id: RecordId = { scope: request.scope, key: request.key };
    let sentAt = performance.now();
    const onClaim = () => {
      sentAt = performance.now();
    };
    let reply: ClaimReply;
    try {
      reply = await this.#store('waitForOutcome', id, () =>
        this.store.waitForOutcome(id, claimOptions, { timeoutMs, signal: options.signal, onClaim }),
      );
    } catch (error) {
      throw await this.#giveBackWritten(id, error);
    }
    // The lease of the claim the wait ended with counts from when that claim was sent.
    this.#requestedAt.set(reply, sentAt);
    this.#emitOutcome(request, reply);
    return reply;
  }

  /**
   * Claims one key (lua/claim.lua) and emits `outcome`.
   * @throws {@link StoreUnavailableError} when the store does not answer (whatever `storeFailureMode`). A
   *   claim the store had written before it failed (`writtenClaim`: `waitForReplicas`, its `WAIT` or
   *   `start` unanswered) is given back unrun first (`release`, one try, no attempt spent), and the error
   *   then names none; it still names it when the store did not answer the give-back either (the claim
   *   then holds the key until its lease lapses).
   */
  async claim(request: RunRequest, options: RunOptions = NO_OPTIONS): Promise<ClaimReply> {
    const requestedAt = performance.now();
    let reply: ClaimReply;
    try {
      reply = await this.#claim(request, options);
    } catch (error) {
      throw await this.#giveBackWritten(request, error);
    }
    this.#requestedAt.set(reply, requestedAt);
    return reply;
  }

  /** {@link Idempotency.claim} without remembering when it was requested. */
  async #claim(request: RunRequest, options: RunOptions): Promise<ClaimReply> {
    const claimOptions = this.#claimOptions(request, options);
    let reply: ClaimReply;
    try {
      // Not through #store: a closure and an async frame per message (bench/README.md, profile).
      reply = await this.store.claim(request, claimOptions);
    } catch (error) {
      this.#storeError('claim', error, request);
      throw error;
    }
    this.#emitOutcome(request, reply);
    return reply;
  }

  /**
   * Claims many keys in one round trip (`IdempotencyStore.claimMany`), for batch consumers. Replies come
   * in request order; each then goes to {@link Idempotency.execute} or {@link Idempotency.resultOf}.
   *
   * By default the claims are reservations (`reserve: true`): no attempt counts until
   * {@link Idempotency.execute} starts a handler (one `start` call per message, which also renews the
   * lease). A batch that is interrupted (rebalance, shutdown) gives its unrun reservations back with
   * {@link Idempotency.giveBack}, and a crash before a handler starts leaves a reservation whose expired
   * lease the next claim acquires as `ACQUIRED`: neither spends an attempt, so `maxAttempts` counts only
   * handlers that ran (a message that crashes its consumer mid-handler still ends FAILED).
   * @throws {@link StoreUnavailableError} when the store does not answer.
   */
  async claimMany(
    requests: readonly RunRequest[],
    options: RunOptions & { readonly reserve?: boolean } = {},
  ): Promise<ClaimReply[]> {
    const reserve = options.reserve ?? true;
    const batch = requests.map((r) => ({
      id: { scope: r.scope, key: r.key },
      options: { ...this.#claimOptions(r, options), reserve },
    }));
    const requestedAt = performance.now();
    const replies = await this.#store('claimMany', undefined, () => this.store.claimMany(batch));
    for (const [i, reply] of replies.entries()) {
      this.#requestedAt.set(reply, requestedAt);
      this.#emitOutcome(requests[i]!, reply);
    }
    return replies;
  }

  /**
   * Turns a claim reply whose handler must not run (DUPLICATE, CONFLICT, PAYLOAD_MISMATCH, FAILED) into
   * its result; DUPLICATE's stored result is decoded.
   * @throws {@link InvalidOptionError} when given an ACQUIRED reply (use {@link Idempotency.execute}).
   * @throws {@link UnreadableResultError} for a DUPLICATE whose stored result cannot be decoded (an unknown
   *   encoding, written by a newer version, or corrupt bytes): the operation completed, and the error
   *   carries the DUPLICATE's facts (`duplicate`); a consumer settles it as a DUPLICATE all the same (the
   *   kit's `unreadableDuplicateOf`).
   */
  resultOf<T>(reply: ClaimReply): Exclude<RunResult<T>, ExecutionResult<T> | { outcome: 'UNPROTECTED' }> {
    // Literals, not a shared `base` spread: the duplicate path runs per message too.
    const { fencingToken, attempt } = reply;
    switch (reply.outcome) {
      case 'DUPLICATE':
        return {
          outcome: 'DUPLICATE',
          fencingToken,
          attempt,
          result: reply.result === undefined ? undefined : decodeDuplicateResult<T>(reply),
          hasResult: reply.result !== undefined,
          completedAtMs: reply.completedAtMs,
        };
      case 'CONFLICT':
        return { outcome: 'CONFLICT', fencingToken, attempt, retryAfterMs: reply.remainingLeaseMs };
      case 'PAYLOAD_MISMATCH':
        return { outcome: 'PAYLOAD_MISMATCH', fencingToken, attempt, state: reply.state };
      case 'FAILED':
        return {
          outcome: 'FAILED',
          fencingToken,
          attempt,
          error: reply.error,
          deadLettered: reply.deadLettered,
        };
      default:
        throw new InvalidOptionError(
          `settle() takes a reply whose handler must not run, got ${reply.outcome}`,
        );
    }
  }

  /**
   * Gives back a claim whose handler did not run and will not run (an interrupted batch, a delivery that
   * ended while its claim waited): the record is RELEASED for the next delivery, and costs no attempt: a
   * reservation (`claimMany`) counted none, a counted claim gives its attempt back
   * (`ReleaseOptions.neverStarted`), so `maxAttempts` counts only handlers that ran. A claim that was
   * `ACQUIRED_STALE` leaves the record stale: the next claim is `ACQUIRED_STALE` too, since the handler
   * whose lease lapsed may have left partial effects. Not for a claim whose handler ran: `execute` settles
   * those. Resolves `false` when the claim was already lost (nothing changed). One try: the kit's
   * `giveBackUnrun` tries again while the store does not answer (store/unrun-release.ts says which layer
   * does what).
   * @param claim - the claim reply (`ACQUIRED`/`ACQUIRED_STALE`), or the {@link WrittenClaim} a
   *   `StoreUnavailableError` still names (`claim`, `run` or `waitForOutcome` could not give it back: the
   *   store did not answer that either); only its `fencingToken` and `outcome` are read.
   * @throws {@link StoreUnavailableError} when the store does not answer (after a `storeError` event).
   */
  async giveBack(request: RecordId, claim: AcquiredReply | WrittenClaim): Promise<boolean> {
    const id: RecordId = { scope: request.scope, key: request.key };
    const options = unrunReleaseOptions(claim, this.options.retentionMs);
    const reply = await this.#store('release', id, () => this.store.release(id, claim.fencingToken, options));
    return reply.ok;
  }

  /** @deprecated Renamed {@link Idempotency.resultOf}; this name goes in the next minor version. */
  settle<T>(reply: ClaimReply): Exclude<RunResult<T>, ExecutionResult<T> | { outcome: 'UNPROTECTED' }> {
    return this.resultOf<T>(reply);
  }

  /** @deprecated Renamed {@link Idempotency.giveBack}; this name goes in the next minor version. */
  release(request: RecordId, claim: AcquiredReply | WrittenClaim): Promise<boolean> {
    return this.giveBack(request, claim);
  }

  /**
   * Writes the completion of a run whose write was not recorded (`status: 'completed'`, `recorded: false`)
   * once more, with `execute`'s rules and events (result limits, fencing, `completed`/`resultOmitted`/
   * `failed`/`leaseLost`); for an adapter that keeps trying while the store is down. See
   * runner/complete-claim.ts.
   * @param durationMs - the handler's run time for `completed`, in milliseconds; by default
   *   `run.durationMs` (what the runner measured when the handler returned).
   * @throws whatever the store throws (`StoreUnavailableError` when it does not answer), after `storeError`.
   */
  completeClaim<T>(
    request: RecordId,
    run: CompletedResult<T>,
    durationMs?: number,
  ): Promise<ExecutionResult<T>> {
    return completeClaim(
      { store: this.store, options: this.options, emit: (n, ...p) => this.#emit(n, ...p) },
      request,
      run,
      durationMs,
    );
  }

  /**
   * Records that an adapter dead-lettered a FAILED record (`IdempotencyStore.markDeadLettered`), so a
   * redelivery of the key settles as FAILED with `deadLettered: true` and is not dead-lettered again.
   * Call it after the dead-letter copy is durably sent. Resolves `true` when this call set the mark,
   * `false` when it was set already or the record is no longer this FAILED record. A record FAILED only
   * because its last lease lapsed may still be completed by that stalled holder after it was
   * dead-lettered: it is then COMPLETED (the mark cleared) while the dead-letter queue holds its copy.
   * @throws {@link StoreUnavailableError} when the store does not answer.
   */
  async markDeadLettered(request: RecordId, failed: { readonly fencingToken: number }): Promise<boolean> {
    const id: RecordId = { scope: request.scope, key: request.key };
    const reply = await this.#store('markDeadLettered', id, () =>
      this.store.markDeadLettered(id, failed.fencingToken),
    );
    return reply.ok && reply.first;
  }

  /**
   * Runs the handler of a claim this worker holds, keeping the lease alive, and records how it ended
   * (complete, release or fail, each fenced by the claim's token). Never rejects because of the handler.
   * A reservation (`started: false`, from {@link Idempotency.claimMany}) is started first (its attempt
   * counts now, its lease renews from now). Any other claim's lease counts from when the claim was
   * requested (by the local monotonic clock; from now for a reply this runner did not receive), whatever
   * extended it since, unless `options.renewedLease` says when the caller's last extension renewed it (a
   * `LeaseKeeperSet`'s `take` hands that over): the lease then counts from the later of the two. When
   * less than one heartbeat interval of it is left, or none, one `extend` renews it before the handler
   * starts, so the lease keeper's first beat has at least half an interval to be answered. When the claim was lost before the
   * handler (the start or the extension refused: another worker claimed the key), nothing runs and the
   * result is `lease-lost` with `handlerStarted: false`.
   * @throws {@link StoreUnavailableError} when the store does not answer the start of a reservation, or
   * that one extension (nothing ran, whatever `storeFailureMode`: the claim may still be held, and Redis
   * may still apply the `start`). Its `writtenClaim` names the claim: give it back with
   * {@link Idempotency.giveBack} or the kit's `giveBackUnrun` (no attempt spent), or start it again.
   * @throws {@link InvalidOptionError} when an option is out of range (also a `signal` that is not an
   * `AbortSignal`, or a `renewedLease` whose `sentAt` is not a finite time no later than now, whose
   * `leaseMs` is not a finite number >= 0, or whose `fencingToken` is not the claim's).
   */
  execute<T>(
    request: RecordId,
    claim: AcquiredReply,
    handler: Handler<T>,
    options: ExecuteOptions = NO_OPTIONS,
  ): Promise<ExecutionResult<T>> {
    return this.#execute(
      request,
      claim,
      handler,
      options,
      this.#requestedAt.get(claim),
      options?.renewedLease,
    );
  }

  /**
   * {@link Idempotency.execute}, given when the claim was requested (`undefined`: unknown, now), the
   * caller's last confirmed renewal of its lease (`undefined`: none), and whether to give the claim back
   * (one try) when the store does not answer its start (`run`, whose caller never sees the claim).
   */
  async #execute<T>(
    request: RecordId,
    claim: AcquiredReply,
    handler: Handler<T>,
    options: RunOptions,
    requestedAt: number | undefined,
    renewedLease?: LeaseRenewal,
    giveBackUnstarted = false,
  ): Promise<ExecutionResult<T>> {
    checkHandler(handler);
    checkRequest(request);
    options = options ?? NO_OPTIONS;
    if (options !== NO_OPTIONS) checkRunOptions(options);
    if (renewedLease !== undefined) checkLeaseRenewal('renewedLease', renewedLease, claim.fencingToken);
    const id: RecordId = { scope: request.scope, key: request.key };
    const { fencingToken, outcome } = claim;
    let attempt = claim.attempt;
    const leaseMs = options.leaseMs ?? this.options.leaseMs;
    const heartbeatIntervalMs = heartbeatIntervalFor(leaseMs, this.options.heartbeatIntervalMs);
    // The lease counts from when the claim was requested (the store's lease started no earlier), not
    // from now: a claim that waited in a batch has less left. Or from when the caller's last confirmed
    // extension was sent (a LeaseKeeperSet's), when that ends later: never from a reply's arrival.
    let leaseEndsAt = (requestedAt ?? performance.now()) + (claim.leaseExpiresAtMs - claim.serverTimeMs);
    if (renewedLease !== undefined) {
      leaseEndsAt = Math.max(leaseEndsAt, renewedLease.sentAt + renewedLease.leaseMs);
    }
    if (claim.started === false || leaseEndsAt - performance.now() < heartbeatIntervalMs) {
      const started = await this.#startClaim(id, claim, leaseMs, giveBackUnstarted);
      if (started === undefined) return this.#notRun(id, outcome, fencingToken, attempt);
      attempt = started.attempt ?? attempt;
      leaseEndsAt = started.leaseEndsAt;
    }
    const keeper = new LeaseKeeper(
      this.store,
      id,
      fencingToken,
      { leaseMs, retentionMs: this.options.retentionMs, heartbeatIntervalMs, leaseEndsAt },
      this.#keeperCallbacks,
      options,
    );
    const claimed: HeldClaim = { id, outcome, fencingToken, attempt, keeper };
    const ran = await this.#callHandler(claimed, handler, options);
    if (ran.thrown === undefined && options.onHandlerReturned) {
      try {
        options.onHandlerReturned();
      } catch {
        // A caller's bug must not change the outcome.
      }
    }
    if (ran.thrown === undefined) {
      const completed = await this.#complete(claimed, ran.value as T, ran.durationMs);
      if (!('thrown' in completed)) return completed;
      return this.#endThrown(claimed, completed.thrown, options);
    }
    return this.#endThrown(claimed, ran.thrown, options);
  }

  /**
   * Runs the handler while the keeper extends the lease, bounded by `handlerTimeoutMs`. Never rejects: a
   * throw, or the timeout, comes back as `thrown`.
   */
  async #callHandler<T>(
    claimed: HeldClaim,
    handler: Handler<T>,
    options: RunOptions,
  ): Promise<HandlerRun<T>> {
    const { id, keeper } = claimed;
    const started = performance.now();
    keeper.start();
    const handlerTimeoutMs = options.handlerTimeoutMs ?? this.options.handlerTimeoutMs;
    // A LongTimeout, not setTimeout: Node fires a delay above 2^31 - 1 ms after 1 ms.
    let timer: LongTimeout | undefined;
    let timedOut: HandlerTimeoutError | undefined;
    try {
      // The keeper makes its AbortController only for a handler that reads the signal.
      const context: HandlerContext = new LazySignalContext(
        id.scope,
        id.key,
        claimed.fencingToken,
        claimed.attempt,
        claimed.outcome,
        keeper,
      );
      // Without a timeout the handler is awaited directly: the wrapper Promise.race needs costs a promise
      // and a closure per message.
      const value = await (handlerTimeoutMs > 0
        ? Promise.race([
            (async () => handler(context))(),
            new Promise<never>((_, reject) => {
              timer = new LongTimeout(() => {
                timedOut = new HandlerTimeoutError(
                  `The handler of ${id.scope}/${id.key} ran longer than handlerTimeoutMs (${handlerTimeoutMs} ms)`,
                );
                keeper.abort(timedOut);
                reject(timedOut);
              }, handlerTimeoutMs);
            }),
          ])
        : handler(context));
      return { value, thrown: undefined, durationMs: await this.#stopKeeper(keeper, started, timer) };
    } catch (error) {
      // Never `instanceof` on a thrown value: a revoked Proxy throws on it.
      const byRunner = timedOut !== undefined && error === timedOut ? 'timeout' : undefined;
      return {
        value: undefined,
        thrown: { error, byRunner },
        durationMs: await this.#stopKeeper(keeper, started, timer),
      };
    }
  }

  /** Stops the handler's timer and its lease keeper; the handler's run time, in milliseconds. */
  async #stopKeeper(
    keeper: LeaseKeeper<RunOptions>,
    started: number,
    timer: LongTimeout | undefined,
  ): Promise<number> {
    timer?.clear();
    const extending = keeper.stop();
    if (extending) await extending;
    return performance.now() - started;
  }

  /**
   * Writes COMPLETED with the handler's result. A result too large (under `onResultTooLarge: 'fail'`) or
   * not serializable comes back as `thrown`, to fail the record.
   */
  async #complete<T>(
    claimed: HeldClaim,
    value: T,
    durationMs: number,
  ): Promise<ExecutionResult<T> | { readonly thrown: Thrown }> {
    const { id, fencingToken, outcome, attempt } = claimed;
    let encoded: ReturnType<typeof encodeResult>;
    try {
      encoded = encodeResult(value, this.options);
    } catch (error) {
      const cause = new ResultTooLargeError('The handler result cannot be serialized as JSON', {
        cause: error,
      });
      return { thrown: { error: cause, byRunner: 'result-too-large' } };
    }
    if (encoded.kind === 'too-large') {
      const { maxResultBytes } = this.options;
      if (this.options.onResultTooLarge !== 'omit') {
        const text = `The handler result is ${encoded.bytes} bytes encoded; maxResultBytes is ${maxResultBytes}`;
        return { thrown: { error: new ResultTooLargeError(text), byRunner: 'result-too-large' } };
      }
      this.#emit('resultOmitted', { ...id, bytes: encoded.bytes, maxResultBytes });
    }
    const result = encoded.kind === 'stored' ? encoded.value : undefined;
    const write = await this.#write('complete', id, fencingToken, () =>
      this.store.complete(id, fencingToken, { retentionMs: this.options.retentionMs, result }),
    );
    if (write === 'lost') return this.#lostOnWrite(claimed, true, value, undefined);
    const recorded = write === 'ok';
    if (this.listenerCount('completed') > 0) {
      this.#emit('completed', { ...id, attempt, fencingToken, durationMs, recorded });
    }
    const resultOmitted = encoded.kind === 'too-large';
    const completed: CompletedResult<T> = {
      outcome,
      fencingToken,
      attempt,
      status: 'completed',
      result: value,
      recorded,
      resultOmitted,
      durationMs,
    };
    // A late write of it (completeClaim) that the store refuses says where the claim was lost first.
    const lostDuring = recorded ? undefined : claimed.keeper.lostDuring;
    return lostDuring === undefined ? completed : { ...completed, leaseLostDuring: lostDuring };
  }

  /** Releases the record after a retryable error with attempts left, else fails it. */
  async #endThrown<T>(claimed: HeldClaim, thrown: Thrown, options: RunOptions): Promise<ExecutionResult<T>> {
    const { id, fencingToken, outcome, attempt } = claimed;
    const { error } = thrown;
    const reason =
      thrown.byRunner === 'result-too-large'
        ? 'result-too-large'
        : thrown.byRunner !== 'timeout' && !this.options.isRetryable(error)
          ? 'non-retryable'
          : attempt >= (options.maxAttempts ?? this.options.maxAttempts)
            ? 'attempts-exhausted'
            : undefined;
    // A handler past handlerTimeoutMs may still run: the record says so, and the claim after this one, or
    // after an operator's release of the FAILED record, is ACQUIRED_STALE.
    const abandoned = thrown.byRunner === 'timeout';
    const retentionMs = this.options.retentionMs;
    if (reason === undefined) {
      const write = await this.#write('release', id, fencingToken, () =>
        this.store.release(id, fencingToken, { retentionMs, abandoned }),
      );
      if (write === 'lost') return this.#lostOnWrite(claimed, false, undefined, error);
      this.#emit('released', { ...id, attempt, fencingToken, error, recorded: write === 'ok' });
      return { outcome, fencingToken, attempt, status: 'released', error, recorded: write === 'ok' };
    }
    const write = await this.#write('fail', id, fencingToken, () =>
      this.store.fail(id, fencingToken, { retentionMs, error: describeError(error), abandoned }),
    );
    if (write === 'lost') return this.#lostOnWrite(claimed, reason === 'result-too-large', undefined, error);
    this.#emit('failed', { ...id, attempt, fencingToken, error, reason, recorded: write === 'ok' });
    return { outcome, fencingToken, attempt, status: 'failed', error, reason, recorded: write === 'ok' };
  }

  /**
   * The write after the handler was refused: another claim took the record over. The result says where
   * the claim was lost first: while the handler ran, as the keeper saw, else at this write.
   */
  #lostOnWrite<T>(
    claimed: HeldClaim,
    handlerCompleted: boolean,
    result: T | undefined,
    error: unknown,
  ): LeaseLostResult<T> {
    const { id, fencingToken, outcome, attempt } = claimed;
    this.#emit('leaseLost', { ...id, fencingToken, during: 'write' });
    const during = claimed.keeper.lostDuring ?? 'write';
    return {
      outcome,
      fencingToken,
      attempt,
      status: 'lease-lost',
      during,
      handlerStarted: true,
      handlerCompleted,
      result,
      error,
    };
  }

  /**
   * Before a claim's handler: a reservation (`claimMany`) is started (its attempt counts now, its lease
   * renews from now); any other claim, which has less than one heartbeat interval of its lease left, or none
   * (a claim that waited, and no renewal since was handed over, or that one is old too), is extended once.
   * Without it the keeper's first beat would come at half of what is left, and a reply slower than the
   * other half would pass the local deadline and abort a handler whose lease the store still held. The
   * extension renews the lease from now, or takes it back if it ran out and nobody has claimed the key since
   * (the token is still the record's).
   * @returns the attempt (a start's) and the lease's new end by the local clock; `undefined` when the store
   *   refused it: the claim was lost, nothing runs.
   * @throws {@link StoreUnavailableError} naming the claim (`writtenClaim`) when the store did not answer:
   *   Redis may still apply it (a start then counts an attempt). With `giveBack` (`run`), the claim is given
   *   back first (one try), and the error names it only when that went unanswered too.
   */
  async #startClaim(
    id: RecordId,
    claim: AcquiredReply,
    leaseMs: number,
    giveBack: boolean,
  ): Promise<{ attempt?: number; leaseEndsAt: number } | undefined> {
    const { fencingToken } = claim;
    const lease = { leaseMs, retentionMs: this.options.retentionMs };
    const operation = claim.started === false ? 'start' : 'extend';
    const sentAt = performance.now();
    let renewed: StartReply | ExtendReply;
    try {
      renewed = await this.#store(operation, id, () =>
        operation === 'start'
          ? this.store.start(id, fencingToken, lease)
          : this.store.extend(id, fencingToken, lease),
      );
    } catch (error) {
      if (!(error instanceof StoreUnavailableError) || error.writtenClaim !== undefined) throw error;
      const named = new StoreUnavailableError(error.message, {
        cause: error.cause ?? error,
        writtenClaim: { fencingToken, outcome: claim.outcome },
      });
      throw giveBack ? await this.#giveBackWritten(id, named) : named;
    }
    if (!renewed.ok) return undefined;
    const renewal = renewalOf(sentAt, renewed, fencingToken);
    return {
      attempt: operation === 'start' ? (renewed as Extract<StartReply, { ok: true }>).attempt : undefined,
      leaseEndsAt: renewal.sentAt + renewal.leaseMs,
    };
  }

  /** The result of a claim lost before its handler started (a reservation's start or an extension refused). */
  #notRun<T>(
    id: RecordId,
    outcome: AcquiredReply['outcome'],
    fencingToken: number,
    attempt: number,
  ): ExecutionResult<T> {
    this.#emit('leaseLost', { scope: id.scope, key: id.key, fencingToken, during: 'start' });
    return {
      outcome,
      fencingToken,
      attempt,
      status: 'lease-lost',
      during: 'start',
      handlerStarted: false,
      handlerCompleted: false,
      result: undefined,
      error: undefined,
    };
  }

  #claimOptions(request: RunRequest, options: RunOptions | undefined): ClaimOptions {
    checkRequest(request);
    options = options ?? NO_OPTIONS;
    if (options !== NO_OPTIONS) checkRunOptions(options);
    const fp =
      request.fingerprint !== undefined
        ? checkFingerprint(request.fingerprint)
        : request.payload === undefined
          ? undefined
          : computeFingerprint(request.payload);
    // A call without overrides or fingerprint claims with the runner's defaults: one object for all of them.
    if (fp === undefined && options.leaseMs === undefined && options.maxAttempts === undefined) {
      return this.#defaultClaimOptions;
    }
    return {
      leaseMs: options.leaseMs ?? this.options.leaseMs,
      retentionMs: this.options.retentionMs,
      fingerprint: fp,
      maxAttempts: options.maxAttempts ?? this.options.maxAttempts,
    };
  }

  /**
   * `storeFailureMode: 'open'`: runs the handler without a claim. A claim the failed call had written
   * anyway (`storeError.writtenClaim`) is released abandoned once the handler ended, so the next claim is
   * ACQUIRED_STALE: its handler is told an earlier run may have happened. Left to lapse, a claim made as a
   * reservation (`waitForReplicas`) was taken as a clean ACQUIRED.
   */
  async #runUnprotected<T>(
    request: RunRequest,
    handler: Handler<T>,
    storeError: StoreUnavailableError,
  ): Promise<RunResult<T>> {
    const written = storeError.writtenClaim;
    // The handler runs: the claim the failed call wrote is released abandoned below, never given back unrun,
    // so neither the event nor the result names it (a listener or adapter could give it back otherwise).
    const reported = written
      ? new StoreUnavailableError(storeError.message, { cause: storeError.cause ?? storeError })
      : storeError;
    this.#emit('failOpen', { scope: request.scope, key: request.key, error: reported });
    const context = {
      scope: request.scope,
      key: request.key,
      fencingToken: 0,
      attempt: 0,
      outcome: 'UNPROTECTED' as const,
      signal: new AbortController().signal,
    };
    let result: RunResult<T>;
    try {
      const value = await handler(context);
      result = { outcome: 'UNPROTECTED', status: 'completed', result: value, storeError: reported };
    } catch (error) {
      result = { outcome: 'UNPROTECTED', status: 'threw', error, storeError: reported };
    }
    if (written) await this.#abandonWrittenClaim(request, written.fencingToken);
    return result;
  }

  /**
   * Gives back unrun ({@link Idempotency.giveBack}: no attempt spent, a stale claim keeps the record stale)
   * a claim written by the store call that failed with `error` (`StoreUnavailableError.writtenClaim`),
   * one try, and returns the error to reject with: a copy without `writtenClaim` once the store answered
   * the give-back (also when another claim had taken the key: not ours to give back any more), else
   * `error` itself (a release its replicas did not acknowledge counts as answered: the primary applied it).
   * Nothing runs on such a claim: left alone it held the key until its lease lapsed
   * (CONFLICT for the redelivery), and a claim whose `start` Redis applied made the next claim
   * ACQUIRED_STALE with an attempt spent although no handler ran. A failed give-back is a `storeError` event.
   */
  async #giveBackWritten(request: RecordId, error: unknown): Promise<unknown> {
    const written = error instanceof StoreUnavailableError ? error.writtenClaim : undefined;
    if (written === undefined) return error;
    try {
      await this.giveBack(request, written);
    } catch (releaseError) {
      // Replicas that did not acknowledge the release: it was applied on the primary all the same.
      if (!(releaseError instanceof ReplicationTimeoutError)) return error;
    }
    const failed = error as StoreUnavailableError;
    return new StoreUnavailableError(failed.message, { cause: failed.cause ?? failed });
  }

  /**
   * Releases abandoned (`release`, `abandoned: true`) a claim written by a call that failed, after its
   * handler ran unprotected. Not a give-back (unlike {@link Idempotency.giveBack}, without `neverStarted`):
   * the handler ran, so its attempt stays spent and the next claim is ACQUIRED_STALE. One try, not the
   * `writeAttempts` of a write after a claimed run (the store has just failed, and a fail-open run is there
   * to answer without waiting for it). Never rejects: a release
   * the store does not answer is a `storeError` event (the claim then lapses with its lease, and the next
   * claim is ACQUIRED_STALE unless it was a reservation), one refused because another claim took the key
   * meanwhile (the unprotected handler outlived the lease) is `leaseLost`.
   */
  async #abandonWrittenClaim(request: RecordId, fencingToken: number): Promise<void> {
    const id: RecordId = { scope: request.scope, key: request.key };
    const options = { retentionMs: this.options.retentionMs, abandoned: true };
    try {
      const reply = await this.#store('release', id, () => this.store.release(id, fencingToken, options));
      if (!reply.ok) this.#emit('leaseLost', { ...id, fencingToken, during: 'write' });
    } catch {
      // Not an outage (an unexpected reply, replicas that did not acknowledge): already a storeError event.
    }
  }

  /** Calls the store once, emitting `storeError` on failure (which is rethrown). */
  async #store<R>(operation: string, subject: EventSubject | undefined, call: () => Promise<R>): Promise<R> {
    try {
      return await call();
    } catch (error) {
      this.#storeError(operation, error, subject);
      throw error;
    }
  }

  /**
   * Emits `storeError` for a failed store call, but not for a refusal of the caller's own request (see
   * {@link isCallerError}): the call rejects with it, and that is all.
   */
  #storeError(operation: string, error: unknown, subject: EventSubject | undefined): void {
    if (isCallerError(error)) return;
    this.#emit('storeError', {
      operation,
      error,
      subject: subject && { scope: subject.scope, key: subject.key },
    });
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
      // The first try runs outside backOff: exponential-backoff builds its options and a promise chain per
      // call, which showed in the profile of every message (bench/README.md); retries still go through it.
      let reply: WriteReply;
      // Whether a try went unanswered: the store may have applied it, only its reply was lost.
      let unanswered = false;
      try {
        reply = await call();
      } catch (error) {
        this.#storeError(operation, error, subject);
        if (!(error instanceof StoreUnavailableError) || this.options.writeAttempts <= 1) throw error;
        unanswered = true;
        reply = await backOff(() => this.#store(operation, subject, call), {
          numOfAttempts: this.options.writeAttempts - 1,
          startingDelay: 100,
          maxDelay: 2000,
          jitter: 'full',
          delayFirstAttempt: true,
          retry: (e) => e instanceof StoreUnavailableError,
        });
      }
      if (reply.ok) return 'ok';
      // A try that timed out on our side may still have been applied by the store; the retry then finds
      // the record already in the target state under our own token. Tokens never repeat for a key, even
      // after the record was lost (lua/claim.lua): only this claim ever held this token. COMPLETED under
      // it is always this claim's own write: only complete.lua writes that state, fenced by the token
      // (ioredis may also have sent a first try twice, resending it after a reconnect). FAILED and
      // RELEASED are also written under it without this claim (a claim past maxAttempts turns the record
      // FAILED when this last attempt's lease lapsed; an operator's release), so those count as ours
      // only after a try of ours went unanswered.
      const ours = operation === 'complete' || unanswered;
      return ours && reply.currentFencingToken === fencingToken && reply.state === WRITE_TARGET[operation]
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
    if (this.listenerCount('outcome') === 0) return; // before building the payload: once per claim
    this.#emit('outcome', {
      scope: request.scope,
      key: request.key,
      outcome: reply.outcome,
      attempt: reply.attempt,
      fencingToken: reply.fencingToken,
    });
  }

  /**
   * Emits an event; a listener that throws, or an `async` one that rejects, cannot change the outcome
   * (a listener's bug must not turn a completed operation into a failed one) nor end the process with an
   * unhandled rejection.
   */
  #emit<K extends keyof IdempotencyEvents>(name: K, ...payload: IdempotencyEvents[K]): void {
    emitIsolated(this, name, payload);
  }
}

/** A claim whose handler this runner runs, with its lease keeper. */
interface HeldClaim {
  readonly id: RecordId;
  readonly outcome: AcquiredReply['outcome'];
  readonly fencingToken: number;
  readonly attempt: number;
  readonly keeper: LeaseKeeper<RunOptions>;
}

/** What a handler threw; `byRunner` when this runner made the error (result too large, handler timeout). */
interface Thrown {
  readonly error: unknown;
  readonly byRunner?: 'result-too-large' | 'timeout' | undefined;
}

/** How a handler's run ended: its value, or what it threw, and how long it ran in milliseconds. */
type HandlerRun<T> =
  | { readonly value: T; readonly thrown: undefined; readonly durationMs: number }
  | { readonly value: undefined; readonly thrown: Thrown; readonly durationMs: number };

/** The options of a call given none (one object, not one per call: a per-message allocation). */
const NO_OPTIONS: RunOptions = Object.freeze({});

/** The state each fenced write leaves the record in. */
const WRITE_TARGET = { complete: 'COMPLETED', release: 'RELEASED', fail: 'FAILED' } as const;

/**
 * A short description of a handler error for the FAILED record: `Name [code]: message`, at most 1000
 * characters. Never throws, whatever was thrown: `null`, a string, an object whose getters throw or whose
 * message cannot be converted, a revoked Proxy.
 */
export function describeError(error: unknown): string {
  let text: string;
  try {
    if (error !== null && (typeof error === 'object' || typeof error === 'function')) {
      const e = error as { name?: unknown; message?: unknown; code?: unknown };
      const name = safeString(() => e.name, 'Error');
      const code = safeString(() => e.code, '');
      const message = safeString(() => e.message, '');
      text = `${name}${code ? ` [${code}]` : ''}: ${message}`;
    } else {
      text = typeof error === 'symbol' ? error.toString() : String(error);
    }
  } catch {
    text = 'an unprintable thrown value';
  }
  return text.slice(0, 1000);
}

/** `String(read())`, or `fallback` when reading or converting throws or gives nothing. */
function safeString(read: () => unknown, fallback: string): string {
  try {
    const value = read();
    if (value === undefined || value === null || value === '') return fallback;
    return typeof value === 'symbol' ? value.toString() : String(value);
  } catch {
    return fallback || '(unprintable)';
  }
}

/** @throws {@link InvalidOptionError} when the handler is not a function (before the store is touched). */
function checkHandler(handler: unknown): void {
  if (typeof handler !== 'function') {
    throw new InvalidOptionError(
      `The handler must be a function, got ${handler === null ? 'null' : typeof handler}`,
    );
  }
}

/**
 * Whether `error` refuses the caller's own request rather than reports a store that failed: a scope or key
 * the store does not take (`InvalidKeyError`: empty, too long for its `maxKeyBytes`, a lone surrogate), an
 * option or a payload (`InvalidOptionError`, `InvalidPayloadError`). A store throws these before it sends
 * anything; the runner treats them as it treats those it finds itself before the store is touched: the
 * call rejects with the typed error, which is neither a `storeError` event nor a log line. Logged at
 * `error`, a key from outside (an HTTP client's `Idempotency-Key`, a message header) let anyone write
 * error lines at will; whoever made the request decides whether it needs a person (the HTTP package logs
 * a scope it built and the store refused; the broker adapters dead-letter an invalid key with an
 * `invalidKey` event and a warning). Recognised by `code`, so also from another installed copy.
 */
function isCallerError(error: unknown): boolean {
  return isIdempotencyError(error) && CALLER_ERROR_CODES.has(error.code);
}

const CALLER_ERROR_CODES: ReadonlySet<string> = new Set<IdempotencyErrorCode>([
  'INVALID_IDEMPOTENCY_KEY',
  'INVALID_OPTION',
  'INVALID_PAYLOAD',
]);

/** @throws {@link InvalidKeyError} when the request is not an object (its scope and key are checked by the store). */
function checkRequest(request: unknown): void {
  if (request === null || typeof request !== 'object') {
    throw new InvalidKeyError(
      `A request must be an object { scope, key }, got ${request === null ? 'null' : typeof request}`,
    );
  }
}
