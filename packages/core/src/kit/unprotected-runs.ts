/** What an {@link UnprotectedRuns} remembers of one message. */
export interface UnprotectedRunEntry<D> {
  /** Runs of its handler in this process that did not end the message (it threw, or settling failed). */
  readonly runs: number;
  /**
   * A decision that ends the message without another run (a dead-letter copy) whose carrying out failed:
   * the next delivery of the message carries it out again instead of running the handler.
   */
  readonly held: D | undefined;
}

/**
 * The in-process memory of unprotected runs (`outcome: 'UNPROTECTED'`: a message without a key under
 * `missingKey: 'process'`, or the store down under `storeFailureMode: 'open'`), where no idempotency
 * record counts attempts. It bounds how often a message's handler runs when the broker cannot take the
 * decision that ends it (the retry or dead-letter publish fails and the message comes back as it was):
 *
 * - {@link UnprotectedRuns.attemptOf} counts this process's earlier runs of a message into its attempt,
 *   so `maxAttempts` is reached even when the broker's own count (a header, a receive count) did not move;
 * - {@link UnprotectedRuns.hold} keeps a terminal decision (dead-letter) whose copy failed; the next
 *   delivery finds it with {@link UnprotectedRuns.get} and carries it out without running the handler.
 *
 * Entries are keyed by whatever identifies a delivery of one message on the broker (Kafka
 * `topic/partition/offset`, SQS `MessageId`, RabbitMQ a digest of the message), and the map is bounded
 * (`maxTracked`, oldest forgotten first): forgetting an entry only allows one more run, never an ack.
 */
export class UnprotectedRuns<D> {
  readonly #entries = new Map<string, UnprotectedRunEntry<D>>();

  /** @param maxTracked - most messages remembered at once (oldest dropped first). @defaultValue 10000 */
  constructor(private readonly maxTracked = 10_000) {}

  /** What is remembered of `id`, `undefined` when nothing. */
  get(id: string): UnprotectedRunEntry<D> | undefined {
    return this.#entries.get(id);
  }

  /**
   * The attempt number of the next run of `id`: `counted` (what the broker counted: a header, a receive
   * count; 0 when nothing) plus this process's runs of it since, plus 1.
   */
  attemptOf(id: string, counted = 0): number {
    return counted + (this.#entries.get(id)?.runs ?? 0) + 1;
  }

  /** Records one more run of `id` that did not end the message. */
  ran(id: string): void {
    const entry = this.#entries.get(id);
    this.#set(id, { runs: (entry?.runs ?? 0) + 1, held: entry?.held });
  }

  /** Holds `decision` for `id`: it ends the message, but carrying it out failed this time. */
  hold(id: string, decision: D): void {
    this.#set(id, { runs: this.#entries.get(id)?.runs ?? 0, held: decision });
  }

  /** Forgets `id` (its message was settled for good). */
  forget(id: string): void {
    this.#entries.delete(id);
  }

  /** How many messages are remembered. */
  get size(): number {
    return this.#entries.size;
  }

  #set(id: string, entry: UnprotectedRunEntry<D>): void {
    this.#entries.delete(id); // re-inserted last: the most recent
    if (this.#entries.size >= this.maxTracked) {
      const oldest = this.#entries.keys().next();
      if (!oldest.done) this.#entries.delete(oldest.value);
    }
    this.#entries.set(id, entry);
  }
}
