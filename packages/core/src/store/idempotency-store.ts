import type { RecordId } from '../keys';

/**
 * State of a record (DESIGN.md, "The record and its states"). A record that does not exist has no state.
 * - `IN_PROGRESS`: claimed; the holder of the current fencing token runs the operation under a lease.
 * - `COMPLETED`: done; the result (if any) is replayed to duplicates until the retention lapses.
 * - `RELEASED`: the holder gave the claim back after a retryable failure; the next claim acquires it.
 * - `FAILED`: terminal; attempts exhausted or the error was marked non-retryable.
 */
export type RecordState = 'IN_PROGRESS' | 'COMPLETED' | 'RELEASED' | 'FAILED';

/** Every outcome a claim can return (DESIGN.md, "Vocabulary"). */
export type ClaimOutcome =
  | 'ACQUIRED'
  | 'ACQUIRED_STALE'
  | 'DUPLICATE'
  | 'CONFLICT'
  | 'PAYLOAD_MISMATCH'
  | 'FAILED';

/** Arguments of one claim. */
export interface ClaimOptions {
  /** How long the claim holds, in milliseconds, measured on the store's clock. Integer > 0. */
  readonly leaseMs: number;
  /**
   * How long the record is kept after its lease (in progress) or after it finished (completed, released,
   * failed), in milliseconds. Integer > 0.
   */
  readonly retentionMs: number;
  /** SHA-256 hex of the payload; omitted or empty: no payload comparison. */
  readonly fingerprint?: string;
  /**
   * Most attempts allowed; a claim that would start attempt `maxAttempts + 1` turns the record FAILED and
   * returns `FAILED`. 0 or omitted: unlimited.
   */
  readonly maxAttempts?: number;
}

/** The claim succeeded: the caller holds the key until `leaseExpiresAtMs` and must present `fencingToken`. */
export interface AcquiredReply {
  /** `ACQUIRED_STALE` when a previous holder's lease had expired (it crashed or stalled). */
  readonly outcome: 'ACQUIRED' | 'ACQUIRED_STALE';
  /** Grows by one with every successful claim of the key; every later write must present it. */
  readonly fencingToken: number;
  /** 1 for the first claim of the key; survives release. */
  readonly attempt: number;
  /** When the lease ends, in ms since the epoch on the store's clock. */
  readonly leaseExpiresAtMs: number;
  /** The store's clock when the claim was made, in ms since the epoch. */
  readonly serverTimeMs: number;
}

/** The operation already completed; its stored result is replayed. */
export interface DuplicateReply {
  readonly outcome: 'DUPLICATE';
  readonly fencingToken: number;
  readonly attempt: number;
  /** The encoded result as stored by `complete`, or `undefined` when none was stored. */
  readonly result: string | undefined;
  /** When the record completed, in ms since the epoch on the store's clock. */
  readonly completedAtMs: number;
}

/** Another worker holds a live lease on the key. */
export interface ConflictReply {
  readonly outcome: 'CONFLICT';
  readonly fencingToken: number;
  readonly attempt: number;
  /** Milliseconds left on the holder's lease, on the store's clock. */
  readonly remainingLeaseMs: number;
}

/** The key was first claimed with another payload; the operation is never run for this one. */
export interface PayloadMismatchReply {
  readonly outcome: 'PAYLOAD_MISMATCH';
  readonly fencingToken: number;
  readonly attempt: number;
  /** State of the record that holds the other payload. */
  readonly state: RecordState;
}

/** The record is FAILED (terminal). */
export interface FailedReply {
  readonly outcome: 'FAILED';
  readonly fencingToken: number;
  readonly attempt: number;
  /** The error recorded by `fail`, or the store's `ATTEMPTS_EXHAUSTED: …` text. */
  readonly error: string;
}

/** What a claim returns: one reply per outcome. */
export type ClaimReply = AcquiredReply | DuplicateReply | ConflictReply | PayloadMismatchReply | FailedReply;

/** A fenced write was refused: the token is not the record's current one; nothing changed. */
export interface LeaseLostReply {
  readonly ok: false;
  readonly reason: 'LEASE_LOST';
  /** The record's current fencing token (0 when the record no longer exists). */
  readonly currentFencingToken: number;
  /** The record's current state, `null` when it no longer exists. */
  readonly state: RecordState | null;
}

/** Reply of `complete`, `release` and `fail`. */
export type WriteReply = { readonly ok: true; readonly serverTimeMs: number } | LeaseLostReply;

/** Reply of `extend`. */
export type ExtendReply =
  | { readonly ok: true; readonly leaseExpiresAtMs: number; readonly serverTimeMs: number }
  | LeaseLostReply;

/** A record as read by {@link IdempotencyStore.get}, for inspection and tests. */
export interface IdempotencyRecord {
  readonly state: RecordState;
  readonly fencingToken: number;
  readonly attempt: number;
  /** SHA-256 hex of the payload stored at the first claim, or '' when none was given. */
  readonly fingerprint: string;
  /** Lease end on the store's clock (ms since the epoch); only while IN_PROGRESS. */
  readonly leaseExpiresAtMs: number | undefined;
  /** Encoded result; only when COMPLETED with a result. */
  readonly result: string | undefined;
  /** Recorded error; only when FAILED. */
  readonly error: string | undefined;
  /** First claim, on the store's clock (ms since the epoch). */
  readonly createdAtMs: number;
  /** Last change, on the store's clock (ms since the epoch). */
  readonly updatedAtMs: number;
  /** Milliseconds until the store forgets the record (its key TTL); -1 when it has none. */
  readonly ttlMs: number;
}

/** One entry of {@link IdempotencyStore.claimMany}. */
export interface ClaimRequest {
  readonly id: RecordId;
  readonly options: ClaimOptions;
}

/**
 * Where records live and how they change. Each operation is one atomic step of the state machine of
 * DESIGN.md; on Redis each is one Lua script touching one key. Implementations: `RedisIdempotencyStore`
 * (standalone and Cluster) and `MemoryIdempotencyStore` (one process, injectable clock).
 *
 * Every method rejects with `StoreUnavailableError` when the store does not answer and with
 * `UnexpectedReplyError` when it answers with a shape it does not know; ids are checked by
 * `buildRecordKey` (`InvalidKeyError`). Expected states are replies, never errors.
 */
export interface IdempotencyStore {
  /** Atomically claims a key: see {@link ClaimReply} for every outcome. */
  claim(id: RecordId, options: ClaimOptions): Promise<ClaimReply>;
  /**
   * Claims many keys in one round trip (pipelined; on a Cluster one round trip per node when the client
   * uses auto-pipelining). Replies come in the order of the requests. Each claim is atomic on its own;
   * the batch is not a transaction.
   */
  claimMany(requests: readonly ClaimRequest[]): Promise<ClaimReply[]>;
  /** Marks the record COMPLETED and stores `result` (an encoded string) when given. Fenced by `fencingToken`. */
  complete(
    id: RecordId,
    fencingToken: number,
    options: { retentionMs: number; result?: string },
  ): Promise<WriteReply>;
  /** Gives the claim back (RELEASED); the attempt count survives. Fenced by `fencingToken`. */
  release(id: RecordId, fencingToken: number, options: { retentionMs: number }): Promise<WriteReply>;
  /** Marks the record FAILED (terminal) with an error description. Fenced by `fencingToken`. */
  fail(
    id: RecordId,
    fencingToken: number,
    options: { retentionMs: number; error: string },
  ): Promise<WriteReply>;
  /** Heartbeat: the lease ends `leaseMs` after now on the store's clock. Fenced by `fencingToken`. */
  extend(
    id: RecordId,
    fencingToken: number,
    options: { leaseMs: number; retentionMs: number },
  ): Promise<ExtendReply>;
  /** Reads a record without changing it; `null` when there is none. */
  get(id: RecordId): Promise<IdempotencyRecord | null>;
  /**
   * Resolves when the store answers (Redis `PING`), for adapters that paused after a
   * `StoreUnavailableError` and probe before they resume. Rejects with `StoreUnavailableError`.
   */
  ping(): Promise<void>;
}
