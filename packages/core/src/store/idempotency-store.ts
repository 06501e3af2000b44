import type { RecordId } from '../keys';

/**
 * State of a record, see docs/design.md#the-record-and-its-states. A record that does not exist has no state.
 * - `IN_PROGRESS`. Claimed. The holder of the current fencing token runs the operation under a lease.
 * - `COMPLETED`. Done. The result, if any, is replayed to duplicates until the retention lapses.
 * - `RELEASED`. The holder gave the claim back after a retryable failure, and the next claim acquires it.
 * - `FAILED`. For good, because attempts ran out or the error was marked non-retryable.
 */
export type RecordState = 'IN_PROGRESS' | 'COMPLETED' | 'RELEASED' | 'FAILED';

/** Every outcome a claim can return, see docs/design.md#vocabulary. */
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
   * How long the record is kept after its lease while in progress, or after it finished, in milliseconds.
   * Integer > 0.
   */
  readonly retentionMs: number;
  /** SHA-256 hex of the payload. Omitted or empty means no payload comparison. */
  readonly fingerprint?: string;
  /**
   * Most attempts allowed. A claim that would start attempt `maxAttempts + 1` turns the record FAILED and
   * returns `FAILED`. 0 or omitted means unlimited.
   */
  readonly maxAttempts?: number;
  /**
   * Reserve the key without counting an attempt, for batch consumers that claim a whole batch before running
   * any handler. The reply's `started` is `false`, and the attempt counts only when
   * {@link IdempotencyStore.start} reports that the handler starts. A reservation whose holder crashes before
   * `start`, or that is given back with `release`, costs no attempt. A later claim of its expired lease is
   * `ACQUIRED`, not `ACQUIRED_STALE`, since nothing of it can be partial.
   * @defaultValue `false`, so the claim counts its attempt at once
   */
  readonly reserve?: boolean;
}

/** The claim succeeded. The caller holds the key until `leaseExpiresAtMs` and must present `fencingToken`. */
export interface AcquiredReply {
  /**
   * `ACQUIRED_STALE` when a previous holder's lease had expired because it crashed or stalled, or its handler
   * was abandoned by `release` with `abandoned: true`. That attempt may be partial or still running.
   */
  readonly outcome: 'ACQUIRED' | 'ACQUIRED_STALE';
  /**
   * Greater than every token issued before for this key, also across the loss of the record, see
   * {@link FencingToken}. Every later write must present it.
   */
  readonly fencingToken: number;
  /**
   * The attempt the handler runs as, 1 for the first. It survives release. For a reservation it is not
   * counted yet, and {@link IdempotencyStore.start} counts it.
   */
  readonly attempt: number;
  /** When the lease ends, in ms since the epoch on the store's clock. */
  readonly leaseExpiresAtMs: number;
  /** The store's clock when the claim was made, in ms since the epoch. */
  readonly serverTimeMs: number;
  /** `true` when the claim counted the attempt, `false` for a reservation. */
  readonly started: boolean;
}

/** The operation already completed, and its stored result is replayed. */
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

/** The key was first claimed with another payload. The operation never runs for this one. */
export interface PayloadMismatchReply {
  readonly outcome: 'PAYLOAD_MISMATCH';
  readonly fencingToken: number;
  readonly attempt: number;
  /** State of the record that holds the other payload. */
  readonly state: RecordState;
}

/** The record is FAILED for good. */
export interface FailedReply {
  readonly outcome: 'FAILED';
  readonly fencingToken: number;
  readonly attempt: number;
  /** The error recorded by `fail`, or the store's `ATTEMPTS_EXHAUSTED: …` text. */
  readonly error: string;
  /**
   * `true` once an adapter reported this record dead-lettered with {@link IdempotencyStore.markDeadLettered}.
   * A redelivery of the key is then settled without another dead-letter copy.
   */
  readonly deadLettered: boolean;
}

/** What a claim returns, one reply per outcome. */
export type ClaimReply = AcquiredReply | DuplicateReply | ConflictReply | PayloadMismatchReply | FailedReply;

/** A fenced write was refused because the token is not the record's current one. Nothing changed. */
export interface LeaseLostReply {
  readonly ok: false;
  readonly reason: 'LEASE_LOST';
  /** The record's current fencing token, 0 when the record no longer exists. */
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

/** Reply of `start`. The claim's handler runs as `attempt`, under a lease renewed from now. */
export type StartReply =
  | {
      readonly ok: true;
      /** The counted attempt the handler runs as. */
      readonly attempt: number;
      readonly leaseExpiresAtMs: number;
      readonly serverTimeMs: number;
    }
  | LeaseLostReply;

/** Reply of `markDeadLettered`. `first` is `false` when the record was already marked. */
export type MarkDeadLetteredReply = { readonly ok: true; readonly first: boolean } | LeaseLostReply;

/**
 * A fencing token, `max(previous token + 1, store clock in microseconds since the epoch)` at each claim. It
 * grows with every claim of a key and never repeats, even after the record is lost by a delete, expiry,
 * eviction or a Redis restart without persistence, as long as the store's clock does not go back. What
 * remains is a server clock set back, or a failover to a Redis whose clock is behind the old one's, which can
 * issue a token lower than one issued before. About 1.8e15 today, an exact JS integer below 2^53 until the
 * year 2255.
 */
export type FencingToken = number;

/** Options of {@link IdempotencyStore.release}. */
export interface ReleaseOptions {
  /** TTL of the released record, in milliseconds, after which its attempt count is forgotten. Integer > 0. */
  readonly retentionMs: number;
  /**
   * The holder gives up on a handler that may still be running because it exceeded `handlerTimeoutMs`. The
   * next claim reports `ACQUIRED_STALE`, since the earlier attempt may be partial or still running, until a
   * handler starts again. @defaultValue `false`
   */
  readonly abandoned?: boolean;
  /**
   * The claim's handler never started, as when an adapter gives back a claim it did not run. A counted claim
   * gives its attempt back, so `maxAttempts` counts only handlers that ran, and a reservation counted none.
   * Not for a claim whose handler ran, even one that threw at once. @defaultValue `false`
   */
  readonly neverStarted?: boolean;
}

/** Options of {@link IdempotencyStore.fail}. */
export interface FailOptions {
  /** TTL of the failed record, in milliseconds. Later claims answer FAILED until it lapses. Integer > 0. */
  readonly retentionMs: number;
  /** A short description of the error, returned by later `FAILED` claims and by `get`. */
  readonly error: string;
  /**
   * The holder gives up on a handler that may still be running because it exceeded `handlerTimeoutMs` at the
   * last attempt. The record remembers it as `IdempotencyRecord.abandoned`, so after an operator's release by
   * `RedisIdempotencyAdmin.release` the next claim is `ACQUIRED_STALE`, not `ACQUIRED`. Later claims answer
   * `FAILED` either way. @defaultValue `false`, the handler ended
   */
  readonly abandoned?: boolean;
}

/** Options of {@link IdempotencyStore.waitForOutcome}. */
export interface OutcomeWaitOptions {
  /** The bound, how long to wait for the holder's outcome, in milliseconds. Integer >= 0. */
  readonly timeoutMs: number;
  /** Ends the wait early, returning the last CONFLICT reply. */
  readonly signal?: AbortSignal;
  /**
   * Called right before each claim of the wait is sent. A caller can then count the lease of the claim the
   * wait ends with from when it was requested, since its lease started no earlier, and not from when the
   * reply arrived.
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
  /** Lease end on the store's clock, in ms since the epoch. Only while IN_PROGRESS. */
  readonly leaseExpiresAtMs: number | undefined;
  /** Encoded result. Only when COMPLETED with a result. */
  readonly result: string | undefined;
  /** Recorded error. Only when FAILED. */
  readonly error: string | undefined;
  /** IN_PROGRESS under a reservation whose handler has not started. */
  readonly reserved: boolean;
  /** FAILED and marked dead-lettered by {@link IdempotencyStore.markDeadLettered}. */
  readonly deadLettered: boolean;
  /**
   * FAILED only because the last attempt's lease lapsed, field `l` of lua/claim.lua. A claim at `maxAttempts`
   * found the handler's lease expired, so the holder of that lease may still be running, and its `complete`
   * still turns the record COMPLETED while its other writes are refused. False in every other state, and for
   * a record FAILED any other way.
   */
  readonly lapsed: boolean;
  /**
   * The next claim is `ACQUIRED_STALE`, since no handler started after the last one that ran and recorded no
   * outcome. That is a record RELEASED, or reserved since, by a holder that abandoned a handler that may
   * still run, through `release` with `abandoned: true` or a claim given back unrun after `ACQUIRED_STALE`.
   * Or a record reserved by a claim that took over from a handler whose lease lapsed. The record does not say
   * which. On a FAILED record, that last handler may be partial or still running. It exhausted `maxAttempts`
   * after such a release, or its holder gave up on its last handler with `fail` and `abandoned: true`. The
   * next claim is FAILED, and an operator's release makes the claim after it `ACQUIRED_STALE`.
   */
  readonly abandoned: boolean;
  /**
   * First claim, on the store's clock in ms since the epoch. 0 once COMPLETED, because a completed record
   * keeps only what duplicates need, to stay small. Its completion time is `updatedAtMs`.
   */
  readonly createdAtMs: number;
  /** Last change, on the store's clock in ms since the epoch. For a COMPLETED record, when it completed. */
  readonly updatedAtMs: number;
  /** Milliseconds until the store forgets the record, its key TTL. -1 when it has none. */
  readonly ttlMs: number;
}

/** One entry of {@link IdempotencyStore.claimMany}. */
export interface ClaimRequest {
  readonly id: RecordId;
  readonly options: ClaimOptions;
}

/**
 * Where records live and how they change. Each operation is one atomic step of the state machine of
 * docs/design.md#the-lua-contract, and on Redis each is one Lua script touching one key. The implementations
 * are `RedisIdempotencyStore`, standalone and Cluster, and `MemoryIdempotencyStore`, for one process with an
 * injectable clock.
 *
 * Every method rejects with `StoreUnavailableError` when the store does not answer, and with
 * `UnexpectedReplyError` when it answers with a shape it does not know. Ids are checked by `buildRecordKey`,
 * which throws `InvalidKeyError`. Expected states are replies, never errors.
 */
export interface IdempotencyStore {
  /** Atomically claims a key. {@link ClaimReply} lists every outcome. */
  claim(id: RecordId, options: ClaimOptions): Promise<ClaimReply>;
  /**
   * Claims many keys in one pipelined round trip, or on a Cluster one round trip per node when the client
   * auto-pipelines. Replies come in the order of the requests. Each claim is atomic on its own, and the batch
   * is not a transaction. A claim of the batch can fail because a Cluster node does not answer or refuses
   * writes, because of an unexpected reply, or with `waitForReplicas` because a `WAIT` or a `start` fails.
   * The call then rejects with the first failure, after giving back every claim of the batch it wrote, the
   * ones that succeeded and the failed keys' own. Each goes back as never started, so no attempt is spent and
   * a stale claim stays stale, and the redelivery finds the keys claimable rather than IN_PROGRESS until
   * their lease lapses. The error names no `StoreUnavailableError.writtenClaim`, since nothing is left for
   * the caller to give back. A give-back the store does not answer leaves its claim to its lease, and a claim
   * whose own reply never came cannot be given back. `MemoryIdempotencyStore` never fails part of a batch.
   */
  claimMany(requests: readonly ClaimRequest[]): Promise<ClaimReply[]>;
  /** Marks the record COMPLETED, storing the encoded `result` when given. Fenced by `fencingToken`. */
  complete(
    id: RecordId,
    fencingToken: number,
    options: { retentionMs: number; result?: string },
  ): Promise<WriteReply>;
  /**
   * Gives the claim back as RELEASED, and the attempt count survives. Fenced by `fencingToken`. With
   * `abandoned: true`, from the runner's `handlerTimeoutMs`, the handler may still be running with partial
   * side effects. The record remembers it, and the next claim is `ACQUIRED_STALE`, not `ACQUIRED`.
   */
  release(id: RecordId, fencingToken: number, options: ReleaseOptions): Promise<WriteReply>;
  /**
   * Marks the record FAILED for good, with an error description. Fenced by `fencingToken`. With
   * `abandoned: true`, from the runner's `handlerTimeoutMs` at the last attempt, the handler may still be
   * running with partial side effects. The record remembers it, and the claim after an operator's release is
   * `ACQUIRED_STALE`, not `ACQUIRED`.
   */
  fail(id: RecordId, fencingToken: number, options: FailOptions): Promise<WriteReply>;
  /**
   * The handler of a claim starts. It counts the attempt of a reservation, while a counted claim is not
   * counted again, and renews the lease to `leaseMs` from now. Fenced by `fencingToken`.
   */
  start(
    id: RecordId,
    fencingToken: number,
    options: { leaseMs: number; retentionMs: number },
  ): Promise<StartReply>;
  /**
   * Marks a FAILED record dead-lettered, so later claims report `deadLettered: true` and the adapter does not
   * send another dead-letter copy. Call it after the copy is durably sent. A crash in between sends it again,
   * so the copy goes at least once and is never lost. Fenced by the FAILED reply's `fencingToken`, and
   * idempotent. A record FAILED only because its last attempt's lease lapsed can still be completed by that
   * attempt's holder after it was marked. It is then COMPLETED with the mark cleared, and the copy already
   * sent is of an operation that completed.
   */
  markDeadLettered(id: RecordId, fencingToken: number): Promise<MarkDeadLetteredReply>;
  /**
   * Waits a bounded time for the holder of a live lease to reach an outcome, for a delivery that met
   * CONFLICT. It claims again with `options` when the holder's complete, release or fail is published, by
   * sharded Pub/Sub on Redis 7 and in-process on the memory store. It also claims at polling intervals, in
   * case a notification is lost, and when the holder's lease ends. It resolves with the first reply that is
   * not CONFLICT. That is `DUPLICATE` with the stored result within a few milliseconds of the holder's
   * complete, `FAILED`, or `ACQUIRED` or `ACQUIRED_STALE` after a release or a lapsed lease, and the caller
   * then holds the claim. Or it resolves with the last `CONFLICT` when `timeoutMs` passes or `signal` aborts.
   * Nothing of this runs on the path without conflicts.
   * @throws {@link InvalidOptionError} when `timeoutMs` or a claim option is out of range.
   */
  waitForOutcome(id: RecordId, options: ClaimOptions, wait: OutcomeWaitOptions): Promise<ClaimReply>;
  /** Heartbeat. The lease ends `leaseMs` after now on the store's clock. Fenced by `fencingToken`. */
  extend(
    id: RecordId,
    fencingToken: number,
    options: { leaseMs: number; retentionMs: number },
  ): Promise<ExtendReply>;
  /** Reads a record without changing it. `null` when there is none. */
  get(id: RecordId): Promise<IdempotencyRecord | null>;
  /**
   * Resolves when the store answers and would take a write. On Redis that is a script that may write and
   * writes nothing, which a full server or a read-only replica refuses where `PING` would answer. For
   * adapters that paused after a `StoreUnavailableError` and probe before they resume. Rejects with
   * `StoreUnavailableError`.
   */
  ping(): Promise<void>;
}
