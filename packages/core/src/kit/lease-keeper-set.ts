import type { RecordId } from '../keys';
import type { AcquiredReply, IdempotencyStore } from '../store/idempotency-store';
import { unrunReleaseOptions } from '../store/unrun-release';
import { callIsolated } from './isolate';
import { MAX_TIMER_MS } from './long-timeout';
import { checkLeaseMs, checkPositiveInteger } from './option-checks';

/** Lease timings of a {@link LeaseKeeperSet}, in milliseconds. */
export interface LeaseKeeperSetTimings {
  /** The lease each extension renews, from when it is sent (the runner's `leaseMs`, or the consumer's). */
  readonly leaseMs: number;
  /** How long a record is kept after its lease (the runner's `retentionMs`). */
  readonly retentionMs: number;
  /** How often the leases are extended: `heartbeatIntervalFor(leaseMs, runner's heartbeatIntervalMs)`. */
  readonly heartbeatIntervalMs: number;
}

/** What a {@link LeaseKeeperSet} reports; each callback is isolated (one that throws changes nothing). */
export interface LeaseKeeperSetCallbacks {
  /**
   * A store call failed (`extend`: the keeper tries again at the next beat; `release`: the claim is left
   * to its lease, so its key is claimable again once the lease ends).
   */
  readonly onStoreError?: (event: {
    readonly operation: 'extend' | 'release';
    readonly id: RecordId;
    readonly error: unknown;
  }) => void;
  /** The store refused an extension (the fencing token is no longer the record's): the claim is dropped. */
  readonly onLost?: (event: { readonly id: RecordId; readonly fencingToken: number }) => void;
}

interface Held {
  readonly id: RecordId;
  readonly reply: AcquiredReply;
  lost: boolean;
}

/**
 * The claims a batch consumer made up front (one `Idempotency.claimMany` round trip) whose messages have
 * not run yet, keyed by anything the consumer likes (the message's index in its batch, its offset). Their
 * leases are extended together, one `extend` per claim every `heartbeatIntervalMs` (one round of
 * extensions in flight at a time), until each is {@link LeaseKeeperSet.take | taken} for its run (the
 * runner's own lease keeper then takes over in `Idempotency.execute`) or released with
 * {@link LeaseKeeperSet.releaseAll} when the batch stops early (a rebalance, a shutdown). So the claims of a
 * long batch's last messages do not lapse while the first ones run.
 *
 * Claims made as reservations (`claimMany`'s default `reserve: true`) cost no attempt until `execute`
 * starts their handler: a released reservation leaves the attempt count as it was. A claim whose
 * extension the store refuses is dropped ({@link LeaseKeeperSet.take} returns `undefined`: claim again).
 * An extension that fails because the store does not answer is reported and tried again at the next
 * beat; the claim is still handed over, and `execute` renews the lease before the handler starts (a
 * reservation's `start`; one `extend` of a claim with less than one heartbeat interval of its lease left
 * as `execute` counts it), so a lapsed lease never runs a handler unprotected. Timers are unref'd.
 * Generalised from the Kafka adapter's batch claims.
 *
 * @typeParam K - what identifies a claim in the set.
 */
export class LeaseKeeperSet<K = number> {
  readonly #held = new Map<K, Held>();
  readonly #store: Pick<IdempotencyStore, 'extend' | 'release'>;
  readonly #timings: LeaseKeeperSetTimings;
  readonly #callbacks: LeaseKeeperSetCallbacks;
  #timer: NodeJS.Timeout | undefined;
  #inFlight: Promise<void> | undefined;
  #started = false;
  #stopped = false;

  /**
   * @param store - where the claims live (the runner's `store`); only `extend` and `release` are used.
   * @param timings - the lease to renew, the retention, and the beat interval.
   * @param callbacks - what to report.
   * @throws `InvalidOptionError` when a timing is not an integer >= 1, or `leaseMs` is above 2^52.
   */
  constructor(
    store: Pick<IdempotencyStore, 'extend' | 'release'>,
    timings: LeaseKeeperSetTimings,
    callbacks: LeaseKeeperSetCallbacks = {},
  ) {
    this.#store = store;
    this.#timings = {
      leaseMs: checkLeaseMs('leaseMs', timings.leaseMs),
      retentionMs: checkPositiveInteger('retentionMs', timings.retentionMs),
      heartbeatIntervalMs: checkPositiveInteger('heartbeatIntervalMs', timings.heartbeatIntervalMs),
    };
    this.#callbacks = callbacks;
  }

  /** How many claims the set holds (not taken, not released; a lost one until it is taken). */
  get size(): number {
    return this.#held.size;
  }

  /**
   * Adds the claim of `key` (an `ACQUIRED`/`ACQUIRED_STALE` reply of the store or runner). Adding after
   * {@link LeaseKeeperSet.releaseAll} releases the claim at once instead (the batch is over).
   */
  add(key: K, id: RecordId, reply: AcquiredReply): void {
    const held: Held = { id, reply, lost: false };
    if (this.#stopped) {
      void this.#release(held);
      return;
    }
    this.#held.set(key, held);
    if (this.#started && this.#timer === undefined && this.#inFlight === undefined) this.#schedule();
  }

  /** Whether the set holds a claim for `key` (not yet taken). */
  has(key: K): boolean {
    return this.#held.has(key);
  }

  /**
   * Hands over the claim of `key` for its run and stops extending it: the reply to pass to
   * `Idempotency.execute`, or `undefined` when the set holds none for `key` or its lease was lost (claim
   * again). Waits for a round of extensions in flight, so a loss it finds is not missed. The reply is the
   * one {@link LeaseKeeperSet.add} was given (the same object, so the runner still knows when the claim was
   * requested): `execute` counts its lease from the claim, not from the set's extensions, and renews it
   * before the handler when less than one heartbeat interval of that is left.
   */
  async take(key: K): Promise<AcquiredReply | undefined> {
    await this.#inFlight;
    const held = this.#held.get(key);
    this.#held.delete(key);
    return held && !held.lost ? held.reply : undefined;
  }

  /** Starts extending the leases, the first round `heartbeatIntervalMs` from now. */
  start(): void {
    if (this.#started || this.#stopped) return;
    this.#started = true;
    if (this.#held.size > 0) this.#schedule();
  }

  /**
   * Stops extending and gives back (`release`) every claim not taken, after the round of extensions in
   * flight. Resolves when every release was answered or reported through `onStoreError`; never rejects.
   */
  async releaseAll(): Promise<void> {
    this.#stopped = true;
    clearTimeout(this.#timer);
    this.#timer = undefined;
    await this.#inFlight;
    const left = [...this.#held.values()].filter((h) => !h.lost);
    this.#held.clear();
    await Promise.all(left.map((h) => this.#release(h)));
  }

  async #release(held: Held): Promise<void> {
    try {
      // Never started: no attempt spent, and a claim taken over from a lapsed handler leaves the record stale.
      const options = unrunReleaseOptions(held.reply, this.#timings.retentionMs);
      await this.#store.release(held.id, held.reply.fencingToken, options);
    } catch (error) {
      callIsolated(() => this.#callbacks.onStoreError?.({ operation: 'release', id: held.id, error }));
    }
  }

  #schedule(): void {
    if (this.#stopped) return;
    this.#timer = setTimeout(
      () => {
        this.#timer = undefined;
        this.#inFlight = this.#extendAll().finally(() => {
          this.#inFlight = undefined;
          if (this.#held.size > 0) this.#schedule();
        });
      },
      Math.min(this.#timings.heartbeatIntervalMs, MAX_TIMER_MS),
    ); // Node fires a longer delay after 1 ms
    this.#timer.unref();
  }

  async #extendAll(): Promise<void> {
    const held = [...this.#held.values()].filter((h) => !h.lost);
    await Promise.all(
      held.map(async (h) => {
        try {
          const reply = await this.#store.extend(h.id, h.reply.fencingToken, {
            leaseMs: this.#timings.leaseMs,
            retentionMs: this.#timings.retentionMs,
          });
          if (reply.ok) return;
          h.lost = true;
          callIsolated(() => this.#callbacks.onLost?.({ id: h.id, fencingToken: h.reply.fencingToken }));
        } catch (error) {
          callIsolated(() => this.#callbacks.onStoreError?.({ operation: 'extend', id: h.id, error }));
        }
      }),
    );
  }
}
