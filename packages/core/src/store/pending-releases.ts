import { randomBytes } from 'node:crypto';

/** The most releases one store keeps owing; the oldest is dropped first (its claim lapses with its lease). */
export const MAX_PENDING_RELEASES = 10_000;

/**
 * A release the store owes: of a claim whose reply never came, named by the nonce it was sent with
 * (lua/give-back.lua: given back unrun); or of a known claim whose `release` Redis did not answer, by its
 * fencing token (lua/release.lua, with the options it was sent with).
 */
export type PendingRelease =
  | { readonly key: string; readonly retentionMs: number; readonly nonce: string }
  | {
      readonly key: string;
      readonly retentionMs: number;
      readonly fencingToken: number;
      readonly abandoned: boolean;
      readonly neverStarted: boolean;
    };

/** Sends one release; resolves once Redis answered it, rejects when it is to be sent again later. */
export type ReleaseSender = (release: PendingRelease) => Promise<unknown>;

interface Entry {
  readonly release: PendingRelease;
  /** Whether it is on its way (written, no reply yet). */
  sent: boolean;
}

/**
 * The releases one store owes, so that a claim nobody runs does not hold its key for a whole lease. A
 * claim whose reply never came (`commandTimeoutMs` passed, or the connection was lost with the claim on
 * it) may be applied by Redis long after its caller gave up: ioredis resends a command that was in flight
 * when its connection dropped, and a network that held packets delivers them late. Applied, it held its
 * key IN_PROGRESS for a lease nobody ran, spent an attempt, and made the next claim ACQUIRED_STALE.
 *
 * Each claim is sent with a {@link PendingReleases.nonce} that the record keeps while the claim holds it
 * (lua/claim.lua); its release by nonce gives it back unrun only if it still does. A `release` of a known
 * claim that Redis did not answer is owed the same way, by its token. Each is written once the client is
 * connected (at once, on its `ready` event, or before the store's next command): commands on one
 * connection apply in order, so it applies after the late claim and before any claim sent after it (the
 * caller's retry). A round trip only after a call went unanswered, never per message. One that fails (the
 * connection is lost again) is owed again; one answered either way is done.
 */
export class PendingReleases {
  readonly #prefix = randomBytes(6).toString('base64url');
  #count = 0;
  /** In the order they were owed (a Set iterates in insertion order, and drops one in O(1)). */
  readonly #entries = new Set<Entry>();
  /** How many wait to be written. */
  #due = 0;

  /**
   * @param onDue - called when a release becomes due: `again` false when it was just added, true when it
   *   failed and is owed again (the caller then waits for a reconnect or its next command, never retries at
   *   once: a server that refuses it, such as a replica during a failover, would be asked in a loop).
   */
  constructor(private readonly onDue: (again: boolean) => void) {}

  /** A nonce no other claim of any store has: 8 random characters, then a counter. */
  nonce(): string {
    return this.#prefix + (++this.#count).toString(36);
  }

  /** Whether a release waits to be written. */
  get due(): boolean {
    return this.#due > 0;
  }

  /** Releases owed and not yet answered (for tests). */
  get size(): number {
    return this.#entries.size;
  }

  /** Owes `release`. */
  add(release: PendingRelease): void {
    if (this.#entries.size >= MAX_PENDING_RELEASES) this.#drop(this.#entries.values().next().value!);
    this.#entries.add({ release, sent: false });
    this.#due++;
    this.onDue(false);
  }

  /**
   * Writes every release that is due through `send`, synchronously: they leave before whatever the caller
   * sends next. Never throws.
   */
  sendDue(send: ReleaseSender): void {
    for (const entry of [...this.#entries]) {
      if (entry.sent) continue;
      entry.sent = true;
      this.#due--;
      let sent: Promise<unknown>;
      try {
        sent = send(entry.release);
      } catch {
        // Refused before it was written (a bug): it would fail the same way again.
        this.#drop(entry);
        continue;
      }
      sent.then(
        () => this.#drop(entry),
        () => {
          if (!this.#entries.has(entry)) return;
          entry.sent = false;
          this.#due++;
          this.onDue(true);
        },
      );
    }
  }

  #drop(entry: Entry): void {
    if (!this.#entries.delete(entry)) return;
    if (!entry.sent) this.#due--;
  }
}
