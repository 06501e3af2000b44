import type { ClaimOutcome, RecordState } from '../store/idempotency-store';

/** Fields of every result whose claim succeeded (the handler ran). */
interface Executed {
  readonly outcome: 'ACQUIRED' | 'ACQUIRED_STALE';
  /** The claim's fencing token. */
  readonly fencingToken: number;
  /** Which attempt this was (1 for the first). */
  readonly attempt: number;
}

/** The handler returned; the record is COMPLETED (unless `recorded` is false). */
export interface CompletedResult<T> extends Executed {
  readonly status: 'completed';
  readonly result: T;
  /**
   * False when the store stayed unavailable through every write attempt: the handler's side effect
   * happened but the record is still IN_PROGRESS. The adapters still ack (the handler completed); a later
   * duplicate meets the expired lease and may run again, so the `storeError` event reports it.
   */
  readonly recorded: boolean;
  /**
   * True when the handler's result was not stored because its encoded form (JSON, deflated above
   * `compressAboveBytes`) passed `maxResultBytes` under `onResultTooLarge: 'omit'`: the record is
   * completed without it (with `recorded: false`, that is the write that was attempted), so a duplicate
   * is still skipped but replays `undefined` (`DuplicateResult.hasResult` false). The runner's
   * `resultOmitted` event reported it too. False when the result was stored, or when there was none to
   * store (the handler returned `undefined`).
   */
  readonly resultOmitted: boolean;
  /**
   * The handler's run time, in milliseconds, by the local monotonic clock (`performance.now()`): from its
   * start to its return, the lease keeper stopped. The `durationMs` of the runner's `completed` event, also
   * of the one a completion written late reports (`Idempotency.completeClaim`, the kit's
   * `recordCompletionLate`): the same handler run, whenever its write lands.
   */
  readonly durationMs: number;
  /**
   * Set only on a completion that was not recorded (`recorded: false`) after the lease keeper saw the claim
   * lost while the handler ran: `heartbeat` (the store refused an extension) or `local-deadline` (no
   * extension reached the store for a whole lease); the runner's first `leaseLost` event said so. A write of
   * it made later (`Idempotency.completeClaim`, the kit's `recordCompletionLate`) that the store refuses is
   * a `lease-lost` run with this `during`, not `write`: the claim was lost first while the handler ran.
   * `undefined` otherwise (the lease held while the handler ran, or the completion was recorded).
   */
  readonly leaseLostDuring?: 'heartbeat' | 'local-deadline' | undefined;
}

/** The handler threw a retryable error; the record is RELEASED for a later attempt. */
export interface ReleasedResult extends Executed {
  readonly status: 'released';
  readonly error: unknown;
  /** False when the store did not take the release; the lease then expires and the next claim is stale. */
  readonly recorded: boolean;
}

/** The handler threw and the record is FAILED (terminal): non-retryable error or attempts exhausted. */
export interface FailedResult extends Executed {
  readonly status: 'failed';
  readonly error: unknown;
  readonly reason: 'non-retryable' | 'attempts-exhausted' | 'result-too-large';
  /** False when the store did not take the write; the adapters dead-letter all the same. */
  readonly recorded: boolean;
}

/** Where a claim was lost: see {@link LeaseLostResult.during}. */
export type LeaseLostDuring = 'start' | 'heartbeat' | 'local-deadline' | 'write';

/**
 * The claim was lost while the handler ran (the lease expired and another worker claimed the key, or the
 * record vanished), or before it started (a reservation lost before `start`: `handlerStarted` false).
 * Nothing was written. `handlerCompleted` tells whether the handler returned.
 */
export interface LeaseLostResult<T> extends Executed {
  readonly status: 'lease-lost';
  /**
   * Where the claim was lost first, as the runner's `leaseLost` event says it: `start` (before the
   * handler: a reservation's start or the extension before it was refused; nothing ran), `heartbeat` (while
   * the handler ran, the store refused an extension; its signal aborted), `local-deadline` (while the
   * handler ran, no extension reached the store for a whole lease; its signal aborted) or `write` (the
   * lease held while the handler ran, and the write of its outcome, `complete`, `release` or `fail`, was
   * refused). After a loss while the handler ran, the write that follows is refused too (a second
   * `leaseLost` event, `write`): `during` names the first.
   */
  readonly during: LeaseLostDuring;
  /** False when a reserved claim was lost before its handler started: nothing ran. */
  readonly handlerStarted: boolean;
  readonly handlerCompleted: boolean;
  readonly result: T | undefined;
  readonly error: unknown;
}

/** Result of running a held claim: see {@link Idempotency.execute}. */
export type ExecutionResult<T> = CompletedResult<T> | ReleasedResult | FailedResult | LeaseLostResult<T>;

/** The key already completed; the handler did not run. `result` is the replayed stored result. */
export interface DuplicateResult<T> {
  readonly outcome: 'DUPLICATE';
  readonly result: T | undefined;
  /** False when no result was stored (the handler returned `undefined`, or it was too large). */
  readonly hasResult: boolean;
  readonly fencingToken: number;
  readonly attempt: number;
  /** When the key completed, in ms since the epoch on the store's clock. */
  readonly completedAtMs: number;
}

/**
 * Another worker holds a live lease; the handler did not run. Try again after `retryAfterMs`. Also what
 * `run` resolves when the store stopped answering during its `conflictWaitMs` wait (the CONFLICT it had,
 * whatever `storeFailureMode`), unless that wait had written a claim of its own it could not give back:
 * `run` then rejects with the `StoreUnavailableError` naming it (`writtenClaim`).
 */
export interface ConflictResult {
  readonly outcome: 'CONFLICT';
  /** The holder's remaining lease, in milliseconds. */
  readonly retryAfterMs: number;
  readonly fencingToken: number;
  readonly attempt: number;
}

/** The key was first used with another payload; the handler did not run (a producer bug). */
export interface PayloadMismatchResult {
  readonly outcome: 'PAYLOAD_MISMATCH';
  readonly state: RecordState;
  readonly fencingToken: number;
  readonly attempt: number;
}

/** The record is FAILED (terminal) from an earlier attempt; the handler did not run. */
export interface FailedRecordResult {
  readonly outcome: 'FAILED';
  /** The error recorded when it failed. */
  readonly error: string;
  /**
   * `true` once an adapter marked the record dead-lettered (`Idempotency.markDeadLettered`): settle this
   * delivery without sending another dead-letter copy.
   */
  readonly deadLettered: boolean;
  readonly fencingToken: number;
  readonly attempt: number;
}

/**
 * `storeFailureMode: 'open'` only: the store did not answer the claim, and the handler ran without
 * protection. Never after a CONFLICT: a store that stops answering during the `conflictWaitMs` wait runs
 * nothing (see {@link ConflictResult}).
 */
export type UnprotectedResult<T> =
  | {
      readonly outcome: 'UNPROTECTED';
      readonly status: 'completed';
      readonly result: T;
      readonly storeError: unknown;
    }
  | {
      readonly outcome: 'UNPROTECTED';
      readonly status: 'threw';
      readonly error: unknown;
      readonly storeError: unknown;
    };

/** What {@link Idempotency.run} resolves with: one variant per outcome, discriminated by `outcome`. */
export type RunResult<T> =
  | ExecutionResult<T>
  | DuplicateResult<T>
  | ConflictResult
  | PayloadMismatchResult
  | FailedRecordResult
  | UnprotectedResult<T>;

/** Every `outcome` a {@link RunResult} can carry. */
export type RunOutcome = ClaimOutcome | 'UNPROTECTED';
