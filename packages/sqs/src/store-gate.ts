import type { IdempotencyStore } from '@idempotent-consumer/core';

/**
 * Fail-closed switch for polling (DESIGN.md, "store unavailable" → SQS: "leave invisible, stop polling
 * until healthy"). Closed when a claim or write found the store unavailable; {@link StoreGate.waitUntilOpen}
 * then pings the store (`IdempotencyStore.ping`) every `probeIntervalMs` and resolves once it answers.
 * One probe loop runs at a time, shared by every waiter.
 */
export class StoreGate {
  #closed = false;
  #disposed = false;
  #probe: Promise<void> | undefined;

  constructor(
    private readonly store: IdempotencyStore,
    private readonly probeIntervalMs: number,
    private readonly events: {
      onClosed?: (error: unknown) => void;
      onOpened?: (downMs: number) => void;
    } = {},
  ) {}

  /** Whether polling is paused. */
  get closed(): boolean {
    return this.#closed;
  }

  /** Pauses polling. Returns true when this call closed an open gate. */
  close(error?: unknown): boolean {
    if (this.#closed) return false;
    this.#closed = true;
    this.events.onClosed?.(error);
    return true;
  }

  /**
   * Resolves at once when open; otherwise once a ping succeeds. Resolves early (leaving the gate closed)
   * when `signal` aborts.
   */
  async waitUntilOpen(signal?: AbortSignal): Promise<void> {
    if (!this.#closed) return;
    this.#probe ??= this.#probeLoop().finally(() => {
      this.#probe = undefined;
    });
    if (!signal) return this.#probe;
    if (signal.aborted) return;
    await new Promise<void>((resolve) => {
      const onAbort = () => resolve();
      signal.addEventListener('abort', onAbort, { once: true });
      this.#probe!.then(() => {
        signal.removeEventListener('abort', onAbort);
        resolve();
      });
    });
  }

  /** Stops probing (waiters resolve; the gate stays as it is). */
  dispose(): void {
    this.#disposed = true;
  }

  async #probeLoop(): Promise<void> {
    const since = Date.now();
    while (this.#closed && !this.#disposed) {
      try {
        await this.store.ping();
        this.#closed = false;
        this.events.onOpened?.(Date.now() - since);
        return;
      } catch {
        await new Promise((r) => setTimeout(r, this.probeIntervalMs).unref());
      }
    }
  }
}
