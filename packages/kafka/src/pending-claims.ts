import type { AcquiredReply, IdempotencyStore, RecordId } from '@idempotent-consumer/core';

interface Held {
  readonly id: RecordId;
  readonly reply: AcquiredReply;
  lost: boolean;
}

/** Lease timings of {@link PendingClaims}, in milliseconds. */
export interface PendingClaimTimings {
  readonly leaseMs: number;
  readonly retentionMs: number;
  readonly heartbeatIntervalMs: number;
}

/**
 * The claims a batch made up front (one `claimMany` round trip) whose messages have not run yet. Their
 * leases are extended together every `heartbeatIntervalMs` until each is taken for its run (the runner's
 * own lease keeper then takes over) or released when the batch stops early, so a long batch does not let
 * the claims of its last messages lapse. A claim whose extension the store refuses (LEASE_LOST) is dropped:
 * its message claims again when its turn comes.
 */
export class PendingClaims {
  readonly #held = new Map<number, Held>();
  #timer: NodeJS.Timeout | undefined;
  #inFlight: Promise<unknown> | undefined;
  #stopped = false;

  constructor(
    private readonly store: IdempotencyStore,
    private readonly timings: PendingClaimTimings,
    private readonly onError: (operation: string, error: unknown) => void,
  ) {}

  /** Adds the claim of the message at `index` of the batch. */
  add(index: number, id: RecordId, reply: AcquiredReply): void {
    this.#held.set(index, { id, reply, lost: false });
  }

  /** Whether a claim was made for `index` (taken or not). */
  has(index: number): boolean {
    return this.#held.has(index);
  }

  /**
   * Hands over the claim of `index`; `undefined` when its lease was lost meanwhile (claim again).
   * Waits for an extension in flight, so the reply handed over is the one the store last confirmed.
   */
  async take(index: number): Promise<AcquiredReply | undefined> {
    await this.#inFlight;
    const held = this.#held.get(index);
    this.#held.delete(index);
    return held && !held.lost ? held.reply : undefined;
  }

  /** Starts extending the pending leases. */
  start(): void {
    if (this.#held.size === 0) return;
    this.#schedule();
  }

  /** Stops extending and releases every claim not taken (the attempt it used stays counted). */
  async releaseAll(): Promise<void> {
    this.#stopped = true;
    clearTimeout(this.#timer);
    await this.#inFlight;
    const left = [...this.#held.values()].filter((h) => !h.lost);
    this.#held.clear();
    await Promise.all(
      left.map((h) =>
        this.store
          .release(h.id, h.reply.fencingToken, { retentionMs: this.timings.retentionMs })
          .catch((error: unknown) => this.onError('release', error)),
      ),
    );
  }

  #schedule(): void {
    if (this.#stopped) return;
    this.#timer = setTimeout(() => {
      this.#inFlight = this.#extendAll().finally(() => {
        this.#inFlight = undefined;
        this.#schedule();
      });
    }, this.timings.heartbeatIntervalMs);
    this.#timer.unref();
  }

  async #extendAll(): Promise<void> {
    const held = [...this.#held.values()].filter((h) => !h.lost);
    await Promise.all(
      held.map(async (h) => {
        try {
          const reply = await this.store.extend(h.id, h.reply.fencingToken, {
            leaseMs: this.timings.leaseMs,
            retentionMs: this.timings.retentionMs,
          });
          if (!reply.ok) h.lost = true;
        } catch (error) {
          this.onError('extend', error);
        }
      }),
    );
  }
}
