import { performance } from 'node:perf_hooks';
import { type BackoffOptions, computeBackoffMs } from '../backoff';
import { isIdempotencyError } from '../errors';
import type { EventSubject, IdempotencyEvents } from '../runner/events';
import type { Idempotency } from '../runner/idempotency';
import type { IdempotencyStore } from '../store/idempotency-store';
import type { AdapterLog } from './adapter-log';
import { callIsolated } from './isolate';
import { MAX_TIMER_MS } from './long-timeout';
import { checkBackoffOptions } from './option-checks';
import { sleep } from './sleep';
import { checkStoreAnswers, checkStoreAtStart, watchRedisErrors } from './store-check';

/**
 * The default `storeProbeBackoff`: the first ping 125-250 ms after the store stopped answering, then
 * doubling up to one ping every 2.5-5 s (full jitter, so consumers of one store do not ping in step).
 */
export const DEFAULT_STORE_PROBE_BACKOFF: Readonly<Required<BackoffOptions>> = Object.freeze({
  baseMs: 250,
  maxMs: 5000,
  factor: 2,
  jitter: 'full',
});

/** Options of a {@link StoreGate}. */
export interface StoreGateOptions {
  /**
   * How long to wait before each ping while the gate is closed: ping `n` comes
   * `computeBackoffMs(n, storeProbeBackoff)` milliseconds (at least 1) after the previous one failed, the
   * first that long after the gate closed. Fields not given come from {@link DEFAULT_STORE_PROBE_BACKOFF}.
   * @defaultValue {@link DEFAULT_STORE_PROBE_BACKOFF}
   */
  readonly storeProbeBackoff?: BackoffOptions;
  /** Source of randomness in [0, 1) for the jitter, injectable for tests. @defaultValue `Math.random` */
  readonly random?: () => number;
  /**
   * Where the gate logs, at `debug` only, once when it closes (consumption paused) and once when it opens
   * again (with how long it was closed): never a line per message or per ping. The outage's one warning and
   * one recovery line are the runner's (see {@link AdapterLog}). @defaultValue no log
   */
  readonly log?: AdapterLog;
}

/**
 * What a {@link StoreGate} reports; each callback is isolated (one that throws changes nothing). The
 * adapters turn them into their `storeUnavailable` / `storeRecovered` events.
 */
export interface StoreGateCallbacks {
  /**
   * The gate closed (consumption pauses): `error` is what the store failed with, always set; `about` is
   * what the caller of {@link StoreGate.close} named (the message whose store call failed), if anything.
   */
  readonly onStoreUnavailable?: (event: { readonly error: unknown; readonly about?: unknown }) => void;
  /** A ping answered and the gate opened again (consumption resumes) after `downMs` milliseconds. */
  readonly onStoreRecovered?: (event: { readonly downMs: number }) => void;
  /** Ping number `probe` (1 for the first) failed with `error`; the gate stays closed and pings again. */
  readonly onProbeFailed?: (event: { readonly probe: number; readonly error: unknown }) => void;
}

/** One closed period: when it began, its probe loop's stop switch, and the waiters to wake when it ends. */
interface Outage {
  readonly since: number;
  readonly stop: AbortController;
  readonly waiters: Set<(open: boolean) => void>;
}

/**
 * The fail-closed switch of a consumer (docs/design.md#when-redis-does-not-answer): when the idempotency
 * store does not answer, nothing may be acked, committed or deleted, so the consumer stops taking
 * messages until the store answers again.
 *
 * - {@link StoreGate.close} (or {@link StoreGate.closeIfUnavailable} with the error a claim or write
 *   rejected with) closes the gate and reports `onStoreUnavailable`. Closing a closed gate does nothing.
 * - While closed, one probe loop pings the store (`IdempotencyStore.ping`) with `storeProbeBackoff`
 *   between pings, however many callers wait and however often the gate is closed meanwhile. The first
 *   ping that answers opens the gate, reports `onStoreRecovered` with how long it was closed, and wakes
 *   every waiter.
 * - {@link StoreGate.waitUntilOpen} waits for that (or until the caller's signal aborts);
 *   {@link StoreGate.waitUntilOpenWithin} waits at most a given time, counted by the clock from the call,
 *   so a ping that hangs until its command timeout counts against it too.
 * - {@link StoreGate.dispose} ends the probe loop and wakes every waiter (the consumer stops).
 *
 * One gate serves one consumer and every partition, channel or poller in it. Where the behaviour comes
 * from: RabbitMQ's pause-and-probe, Kafka's topic pause until the store answers and its bounded inline
 * wait, and SQS's gate in front of `ReceiveMessage` (the adapters' store-gate code before this kit).
 *
 * @example
 * ```ts
 * const gate = new StoreGate(idempotency.store, { storeProbeBackoff }, {
 *   onStoreUnavailable: ({ error }) => events.emit('storeUnavailable', { queue, error }),
 *   onStoreRecovered: ({ downMs }) => events.emit('storeRecovered', { queue, downMs }),
 * });
 * try { await idempotency.run(request, handler); }
 * catch (error) { if (gate.closeIfUnavailable(error)) { await gate.waitUntilOpen(stopping); } }
 * ```
 */
export class StoreGate {
  readonly #store: Pick<IdempotencyStore, 'ping'>;
  readonly #backoff: BackoffOptions;
  readonly #random: () => number;
  readonly #callbacks: StoreGateCallbacks;
  readonly #log: AdapterLog | undefined;
  #outage: Outage | undefined;
  #disposed = false;

  /**
   * @param store - the store to ping (only its `ping` is used).
   * @param options - the probe's backoff, merged over {@link DEFAULT_STORE_PROBE_BACKOFF} field by field.
   * @param callbacks - what to report.
   * @throws `InvalidOptionError` when `storeProbeBackoff` is out of range (see `checkBackoffOptions`).
   */
  constructor(
    store: Pick<IdempotencyStore, 'ping'>,
    options: StoreGateOptions = {},
    callbacks: StoreGateCallbacks = {},
  ) {
    this.#store = store;
    this.#backoff = checkBackoffOptions(
      'storeProbeBackoff',
      options.storeProbeBackoff,
      DEFAULT_STORE_PROBE_BACKOFF,
    );
    this.#random = options.random ?? Math.random;
    this.#callbacks = callbacks;
    this.#log = options.log;
  }

  /** Whether the gate is closed (the store did not answer, and no ping has answered since). */
  get closed(): boolean {
    return this.#outage !== undefined;
  }

  /** Whether {@link StoreGate.dispose} was called. */
  get disposed(): boolean {
    return this.#disposed;
  }

  /**
   * Closes the gate because the store failed with `error`, reports `onStoreUnavailable` and starts the
   * probe loop.
   * @param about - what the failed call was about (a message), passed to `onStoreUnavailable`.
   * @returns `true` when this call closed an open gate; `false` when it was closed already (nothing is
   *   reported again) or the gate is disposed.
   */
  close(error: unknown, about?: unknown): boolean {
    if (this.#outage || this.#disposed) return false;
    const outage: Outage = { since: performance.now(), stop: new AbortController(), waiters: new Set() };
    this.#outage = outage;
    this.#log?.debug(
      `${this.#log.where} pauses: the idempotency store does not answer (${describe(error)}); nothing is acknowledged until a ping answers`,
      { error },
    );
    callIsolated(() => this.#callbacks.onStoreUnavailable?.({ error, about }));
    void this.#probe(outage);
    return true;
  }

  /**
   * Closes the gate on the runner's first `storeError` that says the store did not answer
   * (`STORE_UNAVAILABLE`) a call of a claim's run: a lease extension, or a try of the write after its
   * handler (`complete`, `release`, `fail`, which the runner tries up to `writeAttempts` times), while the
   * runner fails closed (`storeFailureMode: 'closed'`). A consumer closes the gate itself when a call of
   * its own fails (a claim, a start); these it would see only once the runner gave up, about 18 s later
   * with the default `writeAttempts` when every slot was retrying a write. So the consumer pauses, and
   * `onStoreUnavailable` fires, within `commandTimeoutMs` of the first store call that failed.
   * @param onClosed - called when this closed the gate (an open one), with the error and the record of the
   *   call that failed; isolated.
   * @returns a function that stops following (call it when the consumer stops).
   */
  follow(
    runner: {
      readonly options: { readonly storeFailureMode: string };
      on(event: 'storeError', listener: (...event: IdempotencyEvents['storeError']) => void): unknown;
      off(event: 'storeError', listener: (...event: IdempotencyEvents['storeError']) => void): unknown;
    },
    onClosed?: (error: unknown, subject: EventSubject) => void,
  ): () => void {
    const listener = (event: IdempotencyEvents['storeError'][0]) => {
      if (!RUN_OPERATIONS.has(event.operation) || event.subject === undefined) return;
      if (runner.options.storeFailureMode !== 'closed' || !isUnanswered(event.error)) return;
      const subject = event.subject;
      if (this.close(event.error) && onClosed) callIsolated(() => onClosed(event.error, subject));
    };
    runner.on('storeError', listener);
    return () => runner.off('storeError', listener);
  }

  /**
   * Closes the gate when `error` is a `StoreUnavailableError` (code `STORE_UNAVAILABLE`, from any copy of
   * core), as {@link StoreGate.close} does.
   * @returns whether `error` is one (the gate is then closed, by this call or before).
   */
  closeIfUnavailable(error: unknown, about?: unknown): boolean {
    if (!isUnanswered(error)) return false;
    this.close(error, about);
    return true;
  }

  /**
   * Resolves when the gate is open: at once when it is, else when a ping answers.
   * @param signal - ends the wait early (the consumer stops); the gate stays as it is.
   * @returns `true` when the gate is open; `false` when `signal` aborted or the gate was disposed first.
   *   Never rejects.
   */
  waitUntilOpen(signal?: AbortSignal): Promise<boolean> {
    return this.#wait(signal, undefined);
  }

  /**
   * {@link StoreGate.waitUntilOpen} for at most `maxMs` milliseconds, counted by the clock from this
   * call: pings in flight and the backoff between them both count, so the wait never exceeds `maxMs`
   * (give a consumer that must return to its broker within a deadline, such as a KafkaJS `eachMessage`
   * inside its session timeout, this rather than a count of probes).
   * @returns `true` when the gate is open; `false` when `maxMs` passed, `signal` aborted or the gate was
   *   disposed first. Never rejects.
   */
  waitUntilOpenWithin(maxMs: number, signal?: AbortSignal): Promise<boolean> {
    return this.#wait(signal, maxMs);
  }

  /**
   * Stops the probe loop and wakes every waiter with `false` (the consumer is stopping); a closed gate
   * stays closed, and a disposed gate does not close again.
   */
  dispose(): void {
    this.#disposed = true;
    const outage = this.#outage;
    if (!outage) return;
    outage.stop.abort();
    for (const wake of [...outage.waiters]) wake(false);
  }

  /**
   * Sends one ping to `store`, bounded by its command timeout.
   * @param where - the consumer, for the error's message.
   * @throws {@link StoreUnavailableError} naming the consumer and where Redis is (host and port).
   */
  static check(store: Pick<IdempotencyStore, 'ping'>, where: string, signal?: AbortSignal): Promise<void> {
    return checkStoreAnswers(store, where, signal);
  }

  /**
   * The check of a consumer's start: a store that does not answer throws, or is only logged when the
   * runner fails open. A Redis client still connecting is waited for up to 5 s, or until `signal` aborts.
   */
  static checkAtStart(
    runner: Pick<Idempotency, 'store' | 'options'>,
    log: AdapterLog,
    signal?: AbortSignal,
  ): Promise<void> {
    return checkStoreAtStart(runner, log, signal);
  }

  /**
   * Logs the first error of each outage of the store's Redis client at `debug`, once for every consumer
   * of that client, unless the application listens to its errors itself. @returns a function that stops it.
   */
  static watchRedisErrors(store: object, log: AdapterLog): () => void {
    return watchRedisErrors(store, log);
  }

  #wait(signal: AbortSignal | undefined, maxMs: number | undefined): Promise<boolean> {
    const outage = this.#outage;
    if (!outage) return Promise.resolve(true);
    if (this.#disposed || signal?.aborted || (maxMs !== undefined && maxMs <= 0)) {
      return Promise.resolve(false);
    }
    return new Promise<boolean>((resolve) => {
      let timer: NodeJS.Timeout | undefined;
      const wake = (open: boolean) => {
        outage.waiters.delete(wake);
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
        resolve(open);
      };
      const onAbort = () => wake(false);
      outage.waiters.add(wake);
      signal?.addEventListener('abort', onAbort, { once: true });
      if (maxMs !== undefined) {
        timer = setTimeout(wake, Math.min(maxMs, MAX_TIMER_MS), false);
        timer.unref();
      }
    });
  }

  async #probe(outage: Outage): Promise<void> {
    const { signal } = outage.stop;
    for (let probe = 1; ; probe++) {
      const delayMs = Math.max(1, computeBackoffMs(probe, this.#backoff, this.#random));
      if (!(await sleep(delayMs, signal))) return;
      try {
        await this.#store.ping();
      } catch (error) {
        if (signal.aborted) return;
        callIsolated(() => this.#callbacks.onProbeFailed?.({ probe, error }));
        continue;
      }
      if (signal.aborted) return;
      this.#outage = undefined;
      const downMs = Math.round(performance.now() - outage.since);
      this.#log?.debug(`${this.#log.where} resumes: the idempotency store answers again after ${downMs} ms`, {
        downMs,
      });
      callIsolated(() => this.#callbacks.onStoreRecovered?.({ downMs }));
      for (const wake of [...outage.waiters]) wake(true);
      return;
    }
  }
}

/** The runner's store calls of a claim's run that {@link StoreGate.follow} watches (its `storeError` operations). */
const RUN_OPERATIONS: ReadonlySet<string> = new Set(['extend', 'complete', 'release', 'fail']);

/** Whether `error` says the store did not answer (`STORE_UNAVAILABLE`, from any copy of core). */
export function isUnanswered(error: unknown): boolean {
  return isIdempotencyError(error) && error.code === 'STORE_UNAVAILABLE';
}

function describe(error: unknown): string {
  return error instanceof Error ? `${error.name}: ${error.message}` : String(error);
}
