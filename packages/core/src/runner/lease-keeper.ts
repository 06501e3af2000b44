import { performance } from 'node:perf_hooks';
import { LeaseLostError } from '../errors';
import type { RecordId } from '../keys';
import { MAX_TIMER_MS } from '../kit/long-timeout';
import type { ExtendReply, IdempotencyStore } from '../store/idempotency-store';

/** Timings of a {@link LeaseKeeper}, in milliseconds. */
export interface LeaseKeeperTimings {
  readonly leaseMs: number;
  readonly retentionMs: number;
  readonly heartbeatIntervalMs: number;
  /**
   * When the claim's current lease ends by the local monotonic clock `performance.now()`, counted from when
   * the claim or its last renewal was sent. @defaultValue now + `leaseMs`
   */
  readonly leaseEndsAt?: number;
}

/**
 * What a {@link LeaseKeeper} reports. Each callback gets the keeper, with its `id`, `fencingToken` and
 * `context`, so one callbacks object serves every run of a runner and no closure is made per run.
 */
export interface LeaseKeeperCallbacks<C> {
  /** After every successful extension. The adapters extend the broker's own timer here. */
  onExtended?: (keeper: LeaseKeeper<C>, reply: Extract<ExtendReply, { ok: true }>) => void | Promise<void>;
  /** The claim is lost, and the signal has been aborted with a `LeaseLostError`. */
  onLost: (keeper: LeaseKeeper<C>, during: 'heartbeat' | 'local-deadline') => void;
  /** An extension failed because the store did not answer. The keeper keeps trying. */
  onStoreError: (keeper: LeaseKeeper<C>, error: unknown) => void;
}

/**
 * Keeps one claim's lease alive while its handler runs, extending it with the fencing token every
 * `heartbeatIntervalMs` through lua/extend.lua. It aborts {@link LeaseKeeper.signal} when the store refuses
 * the token, or when no extension has succeeded for a whole lease by the local monotonic clock, since the
 * store may then have let the lease expire. A timer watches that deadline, so an extension that hangs until
 * its command timeout does not delay the abort. One extension is in flight at a time. The `AbortController`
 * is made only when someone reads `signal`.
 */
export class LeaseKeeper<C = undefined> {
  #controller: AbortController | undefined;
  /** Why the signal aborted, once it did. The claim was lost, or the handler ran out of time. */
  #reason: Error | undefined;
  #timer: NodeJS.Timeout | undefined;
  #deadlineTimer: NodeJS.Timeout | undefined;
  #inFlight: Promise<void> | undefined;
  #stopped = false;
  #localDeadline: number;
  #lostDuring: 'heartbeat' | 'local-deadline' | undefined;

  constructor(
    private readonly store: IdempotencyStore,
    readonly id: RecordId,
    readonly fencingToken: number,
    private readonly timings: LeaseKeeperTimings,
    private readonly callbacks: LeaseKeeperCallbacks<C>,
    /** What the caller passes to its callbacks through the keeper. The runner passes the call's options. */
    readonly context: C,
  ) {
    this.#localDeadline = timings.leaseEndsAt ?? performance.now() + timings.leaseMs;
  }

  /** Aborts with a `LeaseLostError` when the claim is lost. Made on first read. */
  get signal(): AbortSignal {
    if (!this.#controller) {
      this.#controller = new AbortController();
      if (this.#reason) this.#controller.abort(this.#reason);
    }
    return this.#controller.signal;
  }

  /**
   * Starts the heartbeat. The first beat comes early enough for what is left of the claim's lease. The
   * deadline timer is armed with the first beat, which is due before the deadline at most half of what is
   * left, so a short handler costs one timer.
   */
  start(): void {
    const left = this.#localDeadline - performance.now();
    this.#schedule(Math.min(this.timings.heartbeatIntervalMs, Math.max(1, Math.floor(left / 2))));
  }

  /**
   * How the claim was lost while the keeper ran, `undefined` while it was not. `heartbeat` means the store
   * refused an extension, and `local-deadline` that no extension reached the store for a whole lease. Not set
   * after {@link abort} or {@link stop}, since the keeper then no longer watches the lease.
   */
  get lostDuring(): 'heartbeat' | 'local-deadline' | undefined {
    return this.#lostDuring;
  }

  /** Aborts the signal with `reason` when the handler ran out of time. {@link stop} ends the heartbeat. */
  abort(reason: Error): void {
    if (this.#reason) return;
    this.#reason = reason;
    this.#controller?.abort(reason);
  }

  /**
   * Stops the heartbeat. Returns the extension in flight to wait for, which never rejects, or `undefined`
   * when there is none. Most runs end before their first beat, and an `await` of nothing costs a tick.
   */
  stop(): Promise<void> | undefined {
    this.#stopped = true;
    clearTimeout(this.#timer);
    if (this.#deadlineTimer !== undefined) clearTimeout(this.#deadlineTimer);
    return this.#inFlight;
  }

  /** Arms or re-arms the timer that aborts the signal when the local deadline passes without an extension. */
  #armDeadline(): void {
    clearTimeout(this.#deadlineTimer);
    if (this.#stopped || this.#reason) return;
    // A Node timer fires a longer delay than its maximum after 1 ms, so the callback re-arms until due.
    const delay = Math.min(MAX_TIMER_MS, Math.max(0, this.#localDeadline - performance.now()));
    this.#deadlineTimer = setTimeout(() => {
      if (this.#stopped) return;
      if (performance.now() >= this.#localDeadline) this.#lose('local-deadline');
      else this.#armDeadline();
    }, delay);
    this.#deadlineTimer.unref();
  }

  #schedule(delayMs = this.timings.heartbeatIntervalMs): void {
    if (this.#stopped || this.#reason) return;
    // A beat due later than a Node timer holds, for a lease above 6.4e9 ms, comes after 2^31 - 1 ms instead.
    // Node fires a longer delay after 1 ms, which extended the lease every millisecond.
    this.#timer = setTimeout(
      () => {
        this.#inFlight = this.#beat().finally(() => {
          this.#inFlight = undefined;
          this.#schedule();
        });
      },
      Math.min(delayMs, MAX_TIMER_MS),
    );
    this.#timer.unref();
  }

  async #beat(): Promise<void> {
    if (this.#deadlineTimer === undefined) this.#armDeadline();
    const sentAt = performance.now();
    try {
      const reply = await this.store.extend(this.id, this.fencingToken, {
        leaseMs: this.timings.leaseMs,
        retentionMs: this.timings.retentionMs,
      });
      // Stopped, or the claim was already declared lost because the local deadline passed while this beat was
      // in flight. A late success renews nothing the run still holds, and is not reported.
      if (this.#stopped || this.#lostDuring) return;
      if (!reply.ok) return this.#lose('heartbeat');
      this.#localDeadline = sentAt + this.timings.leaseMs;
      this.#armDeadline();
      await this.callbacks.onExtended?.(this, reply);
    } catch (error) {
      if (this.#stopped || this.#lostDuring) return;
      this.callbacks.onStoreError(this, error);
      if (performance.now() >= this.#localDeadline) this.#lose('local-deadline');
    }
  }

  #lose(during: 'heartbeat' | 'local-deadline'): void {
    if (this.#reason) return;
    const why =
      during === 'heartbeat'
        ? 'the store refused the fencing token'
        : 'no heartbeat reached the store for a whole lease';
    clearTimeout(this.#deadlineTimer);
    // The beat already scheduled is not sent. The run gave the claim up, and a renewal now would hold the key
    // for another lease, and extend the broker's timer through onExtended, for nobody.
    clearTimeout(this.#timer);
    this.#lostDuring = during;
    this.#reason = new LeaseLostError(`Lost the claim of ${this.id.scope}/${this.id.key}: ${why}`);
    this.#controller?.abort(this.#reason);
    this.callbacks.onLost(this, during);
  }
}
