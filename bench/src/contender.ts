/**
 * One idempotency layer under test: ours, the bare scripts, or a peer library. Every contender is driven the
 * same way (same keys, same handler, same Redis), so their numbers compare within one run.
 */
export interface Contender {
  readonly name: string;
  /**
   * Processes one message whose idempotency key is `key`: runs `handler` unless the layer finds the key
   * taken, and returns what the caller gets back (the handler's result, a replayed result, or `undefined`
   * when the layer replays none). A key held by another caller resolves to {@link BUSY} (never runs).
   */
  process(key: string, handler: () => Promise<unknown>): Promise<unknown>;
  /** Closes connections the contender opened. */
  close(): Promise<void>;
}

/** What {@link Contender.process} resolves to when another caller holds the key (CONFLICT, in progress). */
export const BUSY = Symbol('busy');

/** The handler of the throughput runs: a no-op that returns a small result. */
export const noopHandler = async (): Promise<{ ok: boolean }> => ({ ok: true });

/** Lease (or in-progress window) and retention every contender uses, in milliseconds. */
export const LEASE_MS = 30_000;
export const RETENTION_MS = 600_000;
