import { performance } from 'node:perf_hooks';
import type { RecordId } from '../keys';
import type { Idempotency } from '../runner/idempotency';
import { type LeaseRenewal, renewalOf } from '../runner/lease-renewal';
import type { AcquiredReply } from '../store/idempotency-store';
import { type GiveBackOptions, giveBackUnrun } from './give-back';
import { heartbeatIntervalFor } from './heartbeat';
import { callIsolated } from './isolate';
import { MAX_TIMER_MS } from './long-timeout';
import { checkLeaseMs, checkPositiveInteger } from './option-checks';

/** Lease timings of a {@link LeaseKeeperSet}, in milliseconds. */
export interface LeaseKeeperSetTimings {
  /** The lease each extension renews, from when it is sent (the runner's `leaseMs`, or the consumer's). */
  readonly leaseMs: number;
  /**
   * How long a record is kept after its lease, for the extensions; a release uses the runner's.
   * @defaultValue the runner's `retentionMs`
   */
  readonly retentionMs?: number;
  /**
   * How often the leases are extended, in milliseconds.
   * @defaultValue a third of `leaseMs`, at most the runner's `heartbeatIntervalMs`
   */
  readonly heartbeatIntervalMs?: number;
}

/** What a {@link LeaseKeeperSet} reports; each callback is isolated (one that throws changes nothing). */
export interface LeaseKeeperSetCallbacks {
  /**
   * A store call failed (`extend`: the keeper tries again at the next beat; `release`: one try of a
   * give-back failed, tried again as {@link LeaseKeeperSetGiveBack} says, else the claim is left to its
   * lease, so its key is claimable again once the lease ends). Called for each failed try.
   */
  readonly onStoreError?: (event: {
    readonly operation: 'extend' | 'release';
    readonly id: RecordId;
    readonly error: unknown;
  }) => void;
  /** The store refused an extension (the fencing token is no longer the record's): the claim is dropped. */
  readonly onLost?: (event: { readonly id: RecordId; readonly fencingToken: number }) => void;
}

/**
 * How a {@link LeaseKeeperSet} gives back the claims it still holds when the batch stops: the kit's
 * {@link giveBackUnrun}, with the consumer's store gate and stop signal (see {@link GiveBackOptions}).
 */
export type LeaseKeeperSetGiveBack = Pick<GiveBackOptions, 'gate' | 'signal'>;

/** A claim handed over by {@link LeaseKeeperSet.take}: what `Idempotency.execute` needs of it. */
export interface TakenClaim {
  /** The claim's reply, the one {@link LeaseKeeperSet.add} was given (the same object). */
  readonly claim: AcquiredReply;
  /**
   * The set's last extension of the claim's lease that the store confirmed (`ok`), counted from when it
   * was sent; `undefined` when none was (the lease counts from the claim). Pass it to `execute` as
   * `ExecuteOptions.renewedLease`.
   */
  readonly renewedLease: LeaseRenewal | undefined;
}

interface Held {
  readonly id: RecordId;
  readonly reply: AcquiredReply;
  lost: boolean;
  /** The last extension the store confirmed. */
  renewal: LeaseRenewal | undefined;
}

/**
 * The claims a batch consumer made up front (one `Idempotency.claimMany` round trip) whose messages have
 * not run yet, keyed by anything the consumer likes (the message's index in its batch, its offset). Their
 * leases are extended together, one `extend` per claim every `heartbeatIntervalMs` (one round of
 * extensions in flight at a time), until each is {@link LeaseKeeperSet.take | taken} for its run (the
 * runner's own lease keeper then takes over in `Idempotency.execute`, counting the lease from the set's
 * last confirmed extension) or given back with {@link LeaseKeeperSet.releaseAll} when the batch stops
 * early (a rebalance, a shutdown). So the claims of a long batch's last messages do not lapse while the
 * first ones run, and a counted claim is not extended once more before its handler.
 *
 * Claims made as reservations (`claimMany`'s default `reserve: true`) cost no attempt until `execute`
 * starts their handler; a claim given back costs none either (`Idempotency.giveBack`). A claim whose
 * extension the store refuses is dropped ({@link LeaseKeeperSet.take} returns `undefined`: claim again).
 * An extension that fails because the store does not answer is reported and tried again at the next
 * beat; the claim is still handed over with the last extension that was confirmed, and `execute` renews
 * the lease before the handler starts (a reservation's `start`; one `extend` of a claim with less than one
 * heartbeat interval of its lease left as `execute` counts it), so a lapsed lease never runs a handler
 * unprotected. A give-back the store does not answer is tried again once it answers (the kit's
 * {@link giveBackUnrun}, see {@link LeaseKeeperSetGiveBack}). Timers are unref'd. Generalised from the
 * Kafka adapter's batch claims.
 *
 * @typeParam K - what identifies a claim in the set.
 */
export class LeaseKeeperSet<K = number> {
  readonly #held = new Map<K, Held>();
  readonly #idempotency: Pick<Idempotency, 'store' | 'giveBack' | 'options'>;
  readonly #timings: Required<LeaseKeeperSetTimings>;
  readonly #callbacks: LeaseKeeperSetCallbacks;
  readonly #giveBack: LeaseKeeperSetGiveBack;
  #timer: NodeJS.Timeout | undefined;
  #inFlight: Promise<void> | undefined;
  #started = false;
  #stopped = false;

  /**
   * @param idempotency - the runner that made the claims: its `store` extends them, its `release` gives
   *   them back (and its `options`: `retentionMs`, `storeFailureMode`).
   * @param timings - the lease to renew, the retention, and the beat interval.
   * @param callbacks - what to report.
   * @param giveBack - the store gate and stop signal of the give-backs. @defaultValue none: one try each
   * @throws `InvalidOptionError` when a timing is not an integer >= 1, or `leaseMs` is above 2^52.
   */
  constructor(
    idempotency: Pick<Idempotency, 'store' | 'giveBack' | 'options'>,
    timings: LeaseKeeperSetTimings,
    callbacks: LeaseKeeperSetCallbacks = {},
    giveBack: LeaseKeeperSetGiveBack = {},
  ) {
    this.#idempotency = idempotency;
    this.#timings = {
      leaseMs: checkLeaseMs('leaseMs', timings.leaseMs),
      retentionMs: checkPositiveInteger(
        'retentionMs',
        timings.retentionMs ?? idempotency.options.retentionMs,
      ),
      heartbeatIntervalMs: checkPositiveInteger(
        'heartbeatIntervalMs',
        timings.heartbeatIntervalMs ??
          heartbeatIntervalFor(timings.leaseMs, idempotency.options.heartbeatIntervalMs),
      ),
    };
    this.#callbacks = callbacks;
    this.#giveBack = giveBack;
  }

  /** How many claims the set holds (not taken, not released; a lost one until it is taken). */
  get size(): number {
    return this.#held.size;
  }

  /**
   * Adds the claim of `key` (an `ACQUIRED`/`ACQUIRED_STALE` reply of the runner). Adding after
   * {@link LeaseKeeperSet.releaseAll} gives the claim back at once instead (the batch is over).
   */
  add(key: K, id: RecordId, reply: AcquiredReply): void {
    const held: Held = { id, reply, lost: false, renewal: undefined };
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
   * Hands over the claim of `key` for its run and stops extending it, or `undefined` when the set holds
   * none for `key` or its lease was lost (claim again). Waits for a round of extensions in flight, so a
   * loss it finds is not missed and the last extension is the newest. Run it with
   * `idempotency.execute(id, taken.claim, handler, { renewedLease: taken.renewedLease })`: the claim is the
   * reply {@link LeaseKeeperSet.add} was given (the same object, so the runner still knows when the claim
   * was requested), and `execute` counts its lease from the later of the claim and the set's last confirmed
   * extension (from when that was sent), renewing it before the handler only when less than one heartbeat
   * interval of that is left.
   */
  async take(key: K): Promise<TakenClaim | undefined> {
    await this.#inFlight;
    const held = this.#held.get(key);
    this.#held.delete(key);
    return held && !held.lost ? { claim: held.reply, renewedLease: held.renewal } : undefined;
  }

  /** Starts extending the leases, the first round `heartbeatIntervalMs` from now. */
  start(): void {
    if (this.#started || this.#stopped) return;
    this.#started = true;
    if (this.#held.size > 0) this.#schedule();
  }

  /**
   * Stops extending and gives back every claim not taken, after the round of extensions in flight, with
   * the kit's {@link giveBackUnrun} (`Idempotency.giveBack`: RELEASED, no attempt spent, a claim that was
   * `ACQUIRED_STALE` leaves the record stale). Resolves once each give-back's first try was answered or
   * failed (at once for each while the gate is closed); never rejects. A try the store does not answer is
   * reported through `onStoreError` and made again each time the gate opens, in the background, until one
   * is answered, the signal aborts or the gate is disposed; without a gate there is one try and such a
   * claim lapses with its lease. A claim taken over since is left alone (each try is fenced).
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

  #release(held: Held): Promise<void> {
    return giveBackUnrun(this.#idempotency, held.id, held.reply, {
      ...this.#giveBack,
      onStoreError: (error) => this.#callbacks.onStoreError?.({ operation: 'release', id: held.id, error }),
    });
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
          // The lease is renewed from when Redis applies the extension: no earlier than now.
          const sentAt = performance.now();
          const reply = await this.#idempotency.store.extend(h.id, h.reply.fencingToken, {
            leaseMs: this.#timings.leaseMs,
            retentionMs: this.#timings.retentionMs,
          });
          if (reply.ok) {
            h.renewal = renewalOf(sentAt, reply, h.reply.fencingToken);
            return;
          }
          h.lost = true;
          callIsolated(() => this.#callbacks.onLost?.({ id: h.id, fencingToken: h.reply.fencingToken }));
        } catch (error) {
          callIsolated(() => this.#callbacks.onStoreError?.({ operation: 'extend', id: h.id, error }));
        }
      }),
    );
  }
}
