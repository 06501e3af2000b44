import type { RecordId } from '../keys';

/**
 * State of a record (docs/design.md#the-record-and-its-states). A record that does not exist has no state.
 * - `IN_PROGRESS`: claimed; the holder of the current fencing token runs the operation under a lease.
 * - `COMPLETED`: done; the result (if any) is replayed to duplicates until the retention lapses.
 * - `RELEASED`: the holder gave the claim back after a retryable failure; the next claim acquires it.
 * - `FAILED`: terminal; attempts exhausted or the error was marked non-retryable.
 */
export type RecordState = 'IN_PROGRESS' | 'COMPLETED' | 'RELEASED' | 'FAILED';

/** Every outcome a claim can return (docs/design.md#vocabulary). */
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
  /**
   * Reserve the key without counting an attempt (for batch consumers that claim a whole batch before
   * running any handler): the reply's `started` is `false`, and the attempt counts only when
   * {@link IdempotencyStore.start} reports that the handler starts. A reservation whose holder crashes
   * before `start`, or that is given back with `release`, costs no attempt, and a later claim of its
   * expired lease is `ACQUIRED` (nothing of it can be partial), not `ACQUIRED_STALE`.
   * @defaultValue `false` (the claim counts its attempt at once)
   */
  readonly reserve?: boolean;
}

/** The claim succeeded: the caller holds the key until `leaseExpiresAtMs` and must present `fencingToken`. */
export interface AcquiredReply {
  /**
   * `ACQUIRED_STALE` when a previous holder's lease had expired (it crashed or stalled) or its handler was
   * abandoned (`release` with `abandoned: true`): that attempt may be partial or still running.
   */
  readonly outcome: 'ACQUIRED' | 'ACQUIRED_STALE';
  /**
   * Greater than every token issued before for this key, also across the loss of the record (see
   * {@link FencingToken}); every later write must present it.
   */
  readonly fencingToken: number;
  /**
   * The attempt the handler runs as: 1 for the first; survives release. For a reservation
   * (`reserve: true`) it is not counted yet; {@link IdempotencyStore.start} counts it.
   */
  readonly attempt: number;
  /** When the lease ends, in ms since the epoch on the store's clock. */
  readonly leaseExpiresAtMs: number;
  /** The store's clock when the claim was made, in ms since the epoch. */
  readonly serverTimeMs: number;
  /** `true` when the attempt was counted by the claim; `false` for a reservation (`reserve: true`). */
  readonly started: boolean;
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
  /**
   * `true` once an adapter reported this record dead-lettered ({@link IdempotencyStore.markDeadLettered}):
   * a redelivery of the key is then settled without another dead-letter copy.
   */
  readonly deadLettered: boolean;
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

/** Reply of `start`: the handler of the claim runs as `attempt`, under a lease renewed from now. */
export type StartReply =
  | {
      readonly ok: true;
      /** The counted attempt the handler runs as. */
      readonly attempt: number;
      readonly leaseExpiresAtMs: number;
      readonly serverTimeMs: number;
    }
  | LeaseLostReply;

/** Reply of `markDeadLettered`: `first` is `false` when the record was already marked. */
export type MarkDeadLetteredReply = { readonly ok: true; readonly first: boolean } | LeaseLostReply;

/**
 * A fencing token: `max(previous token + 1, store clock in microseconds since the epoch)` at each claim.
 * It therefore grows with every claim of a key and never repeats, even after the record is lost (deleted,
 * expired, evicted, a Redis restart without persistence), as long as the store's clock does not go back.
 * What remains: a server clock set back, or a failover to a Redis whose clock is behind the old one's,
 * can issue a token lower than one issued before. About 1.8e15 today: an exact JS integer (below 2^53)
 * until the year 2255.
 */
export type FencingToken = number;

/** Options of {@link IdempotencyStore.release}. */
export interface ReleaseOptions {
  /** TTL of the released record, in milliseconds (its attempt count is forgotten after it). Integer > 0. */
  readonly retentionMs: number;
  /**
   * The holder gives up on a handler that may still be running (it exceeded `handlerTimeoutMs`): the
   * next claim reports `ACQUIRED_STALE` (the earlier attempt may be partial or still running), until a
   * handler starts again. @defaultValue `false`
   */
  readonly abandoned?: boolean;
  /**
   * The claim's handler never started (an adapter gives back a claim it did not run): a counted claim
   * gives its attempt back, so `maxAttempts` counts only handlers that ran (a reservation counted none).
   * Not for a claim whose handler ran, even one that threw at once. @defaultValue `false`
   */
  readonly neverStarted?: boolean;
}

/** Options of {@link IdempotencyStore.fail}. */
export interface FailOptions {
  /** TTL of the failed record, in milliseconds (later claims answer FAILED until it lapses). Integer > 0. */
  readonly retentionMs: number;
  /** A short description of the error, returned by later claims (`FAILED`) and `get`. */
  readonly error: string;
  /**
   * The holder gives up on a handler that may still be running (it exceeded `handlerTimeoutMs` at the
   * last attempt): the record remembers it (`IdempotencyRecord.abandoned`), so after an operator's release
   * (`RedisIdempotencyAdmin.release`) the next claim is `ACQUIRED_STALE`, not `ACQUIRED`. Later claims
   * answer `FAILED` either way. @defaultValue `false` (the handler ended)
   */
  readonly abandoned?: boolean;
}

/** Options of {@link IdempotencyStore.waitForOutcome}. */
export interface OutcomeWaitOptions {
  /** The bound: how long to wait for the holder's outcome, in milliseconds. Integer >= 0. */
  readonly timeoutMs: number;
  /** Ends the wait early (the last CONFLICT reply is returned). */
  readonly signal?: AbortSignal;
  /**
   * Called right before each claim of the wait is sent, so a caller can count the lease of the claim the
   * wait ends with from when it was requested (its lease started no earlier), not from when the reply
   * arrived.
   */
  readonly onClaim?: () => void;
}

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
  /** IN_PROGRESS under a reservation (`reserve: true`) whose handler has not started. */
  readonly reserved: boolean;
  /** FAILED and marked dead-lettered ({@link IdempotencyStore.markDeadLettered}). */
  readonly deadLettered: boolean;
  /**
   * FAILED only because the last attempt's lease lapsed (`l` of lua/claim.lua): a claim at `maxAttempts`
   * found the handler's lease expired, so the holder of that lease may still be running, and its
   * `complete` still turns the record COMPLETED (its other writes are refused). False in every other
   * state, and for a record FAILED any other way.
   */
  readonly lapsed: boolean;
  /**
   * The next claim is `ACQUIRED_STALE`, as no handler started since the last one that ran recorded no
   * outcome: RELEASED (or reserved since) by a holder that abandoned a handler that may still run
   * (`release` with `abandoned: true`, also a claim given back unrun after `ACQUIRED_STALE`), or reserved
   * by a claim that took over from a handler whose lease lapsed. The record does not say which. On a
   * FAILED record (one that exhausted `maxAttempts` after such a release, or failed by a holder that gave up
   * on its last attempt's handler: `fail` with `abandoned: true`): that last handler may be partial or
   * still running; the next claim is FAILED, and an operator's release (`RedisIdempotencyAdmin.release`)
   * makes the claim after it `ACQUIRED_STALE`.
   */
  readonly abandoned: boolean;
  /**
   * First claim, on the store's clock (ms since the epoch); 0 once COMPLETED (a completed record keeps
   * only what duplicates need, to stay small: its completion time is `updatedAtMs`).
   */
  readonly createdAtMs: number;
  /** Last change, on the store's clock (ms since the epoch); for a COMPLETED record, when it completed. */
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
 * docs/design.md#the-lua-contract; on Redis each is one Lua script touching one key. Implementations: `RedisIdempotencyStore`
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
   * the batch is not a transaction. When any claim of the batch fails (a Cluster node that does not answer
   * or refuses writes, an unexpected reply; with `waitForReplicas`, a `WAIT` not acknowledged or not
   * answered, a `start` not answered), it rejects with the first failure after giving back every claim of
   * the batch it wrote (`release` as never started: no attempt spent; a stale claim stays stale): the ones
   * that succeeded and the failed keys' own, so that its redelivery finds their keys claimable rather than
   * IN_PROGRESS until their lease lapses. The error names no `StoreUnavailableError.writtenClaim` (it could
   * not say whose key): nothing is left for the caller to give back. A give-back the store does not answer
   * leaves its claim to its lease; a claim whose own reply never came (a command timeout) cannot be given
   * back. `MemoryIdempotencyStore` never fails part of a batch.
   */
  claimMany(requests: readonly ClaimRequest[]): Promise<ClaimReply[]>;
  /** Marks the record COMPLETED and stores `result` (an encoded string) when given. Fenced by `fencingToken`. */
  complete(
    id: RecordId,
    fencingToken: number,
    options: { retentionMs: number; result?: string },
  ): Promise<WriteReply>;
  /**
   * Gives the claim back (RELEASED); the attempt count survives. Fenced by `fencingToken`. With
   * `abandoned: true` (the runner's `handlerTimeoutMs`: the handler may still be running, its side
   * effects partial) the record remembers it and the next claim is `ACQUIRED_STALE`, not `ACQUIRED`.
   */
  release(id: RecordId, fencingToken: number, options: ReleaseOptions): Promise<WriteReply>;
  /**
   * Marks the record FAILED (terminal) with an error description. Fenced by `fencingToken`. With
   * `abandoned: true` (the runner's `handlerTimeoutMs` at the last attempt: the handler may still be
   * running, its side effects partial) the record remembers it, and the claim after an operator's release
   * is `ACQUIRED_STALE`, not `ACQUIRED`.
   */
  fail(id: RecordId, fencingToken: number, options: FailOptions): Promise<WriteReply>;
  /**
   * The handler of a claim starts: counts the attempt of a reservation (`reserve: true`; a counted claim
   * is not counted again) and renews the lease to `leaseMs` from now. Fenced by `fencingToken`.
   */
  start(
    id: RecordId,
    fencingToken: number,
    options: { leaseMs: number; retentionMs: number },
  ): Promise<StartReply>;
  /**
   * Marks a FAILED record dead-lettered, so later claims report `deadLettered: true` and the adapter does
   * not send another dead-letter copy. Call it after the copy is durably sent (a crash in between sends it
   * again: at least once, never lost). Fenced by the FAILED reply's `fencingToken`; idempotent. A record
   * FAILED only because its last attempt's lease lapsed can still be completed by that attempt's holder
   * after it was marked: it is then COMPLETED with the mark cleared, and the dead-letter copy already sent
   * is of an operation that completed.
   */
  markDeadLettered(id: RecordId, fencingToken: number): Promise<MarkDeadLetteredReply>;
  /**
   * Waits a bounded time for the holder of a live lease to reach an outcome, for a delivery that met
   * CONFLICT: claims again (with `options`) when the holder's complete, release or fail is published
   * (sharded Pub/Sub on Redis 7, in-process on the memory store), at polling intervals (in case a
   * notification is lost or unavailable) and when the holder's lease ends. Resolves with the first reply
   * that is not CONFLICT: `DUPLICATE` with the stored result within a few milliseconds of the holder's
   * complete, `FAILED`, or `ACQUIRED`/`ACQUIRED_STALE` after a release or a lapsed lease (the caller now
   * holds the claim); or with the last `CONFLICT` when `timeoutMs` passes or `signal` aborts.
   * Nothing of this runs on the path without conflicts.
   * @throws {@link InvalidOptionError} when `timeoutMs` or a claim option is out of range.
   */
  waitForOutcome(id: RecordId, options: ClaimOptions, wait: OutcomeWaitOptions): Promise<ClaimReply>;
  /** Heartbeat: the lease ends `leaseMs` after now on the store's clock. Fenced by `fencingToken`. */
  extend(
    id: RecordId,
    fencingToken: number,
    options: { leaseMs: number; retentionMs: number },
  ): Promise<ExtendReply>;
  /** Reads a record without changing it; `null` when there is none. */
  get(id: RecordId): Promise<IdempotencyRecord | null>;
  /**
   * Resolves when the store answers and would take a write (Redis: a script that may write and writes
   * nothing, which a full server or a read-only replica refuses where `PING` would answer), for adapters
   * that paused after a `StoreUnavailableError` and probe before they resume. Rejects with
   * `StoreUnavailableError`.
   */
  ping(): Promise<void>;
}
