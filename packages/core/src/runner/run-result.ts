import type { ClaimOutcome, RecordState } from '../store/idempotency-store';

/** Fields of every result whose claim succeeded, so the handler ran. */
interface Executed {
  readonly outcome: 'ACQUIRED' | 'ACQUIRED_STALE';
  /** The claim's fencing token. */
  readonly fencingToken: number;
  /** Which attempt this was, 1 for the first. */
  readonly attempt: number;
}

/** The handler returned. The record is COMPLETED unless `recorded` is false. */
export interface CompletedResult<T> extends Executed {
  readonly status: 'completed';
  readonly result: T;
  /**
   * False when the store stayed unavailable through every write attempt. The handler's side effect happened
   * but the record is still IN_PROGRESS. The adapters still ack, since the handler completed. A later
   * duplicate meets the expired lease and may run again, so the `storeError` event reports it.
   */
  readonly recorded: boolean;
  /**
   * True when the handler's result was not stored because its encoded form passed `maxResultBytes` under
   * `onResultTooLarge: 'omit'`. The encoded form is JSON, deflated above `compressAboveBytes`. The record is
   * completed without the result, or that write was attempted when `recorded` is false. A duplicate is still
   * skipped but replays `undefined`, with `DuplicateResult.hasResult` false. The runner's `resultOmitted`
   * event reported it too. False when the result was stored, or when the handler returned `undefined`.
   */
  readonly resultOmitted: boolean;
  /**
   * The handler's run time in milliseconds, from its start to its return, by the local monotonic clock
   * `performance.now()`. It is the `durationMs` of the runner's `completed` event. A completion written late
   * by `Idempotency.completeClaim` or the kit's `recordCompletionLate` reports the same figure, since it is
   * the same handler run whenever its write lands.
   */
  readonly durationMs: number;
  /**
   * Set only on a completion that was not recorded, after the lease keeper saw the claim lost while the
   * handler ran. `heartbeat` means the store refused an extension. `local-deadline` means no extension
   * reached the store for a whole lease. The runner's first `leaseLost` event said so. If a later write of
   * the completion, by `Idempotency.completeClaim` or the kit's `recordCompletionLate`, is refused, the run
   * is `lease-lost` with this `during`, not `write`, because the claim was lost first. `undefined` when the
   * lease held while the handler ran, or the completion was recorded.
   */
  readonly leaseLostDuring?: 'heartbeat' | 'local-deadline' | undefined;
}

/** The handler threw a retryable error. The record is RELEASED for a later attempt. */
export interface ReleasedResult extends Executed {
  readonly status: 'released';
  readonly error: unknown;
  /** False when the store did not take the release. The lease then expires and the next claim is stale. */
  readonly recorded: boolean;
}

/** The handler threw and the record is FAILED for good, after a non-retryable error or the last attempt. */
export interface FailedResult extends Executed {
  readonly status: 'failed';
  readonly error: unknown;
  readonly reason: 'non-retryable' | 'attempts-exhausted' | 'result-too-large';
  /** False when the store did not take the write. The adapters dead-letter all the same. */
  readonly recorded: boolean;
}

/** Where a claim was lost, see {@link LeaseLostResult.during}. */
export type LeaseLostDuring = 'start' | 'heartbeat' | 'local-deadline' | 'write';

/**
 * The claim was lost while the handler ran, because the lease expired and another worker claimed the key or
 * the record vanished. Or it was lost before the handler started, when a reservation was lost before `start`
 * and `handlerStarted` is false. Nothing was written. `handlerCompleted` tells whether the handler returned.
 */
export interface LeaseLostResult<T> extends Executed {
  readonly status: 'lease-lost';
  /**
   * Where the claim was lost first, as the runner's `leaseLost` event says it.
   * - `start`: before the handler. A reservation's `start`, or the extension before it, was refused, and
   *   nothing ran.
   * - `heartbeat`: while the handler ran, the store refused an extension, and its signal aborted.
   * - `local-deadline`: while the handler ran, no extension reached the store for a whole lease, and its
   *   signal aborted.
   * - `write`: the lease held while the handler ran, and the write of its outcome was refused.
   * After a loss while the handler ran, the write that follows is refused too, with a second `leaseLost`
   * event saying `write`. `during` names the first.
   */
  readonly during: LeaseLostDuring;
  /** False when a reserved claim was lost before its handler started, so nothing ran. */
  readonly handlerStarted: boolean;
  readonly handlerCompleted: boolean;
  readonly result: T | undefined;
  readonly error: unknown;
}

/** Result of running a held claim, see {@link Idempotency.execute}. */
export type ExecutionResult<T> = CompletedResult<T> | ReleasedResult | FailedResult | LeaseLostResult<T>;

/** The key already completed and the handler did not run. `result` is the replayed stored result. */
export interface DuplicateResult<T> {
  readonly outcome: 'DUPLICATE';
  readonly result: T | undefined;
  /** False when no result was stored, because the handler returned `undefined` or it was too large. */
  readonly hasResult: boolean;
  readonly fencingToken: number;
  readonly attempt: number;
  /** When the key completed, in ms since the epoch on the store's clock. */
  readonly completedAtMs: number;
}

/**
 * Another worker holds a live lease, and the handler did not run. Try again after `retryAfterMs`. `run` also
 * resolves with it when the store stopped answering during its `conflictWaitMs` wait, whatever
 * `storeFailureMode`. If that wait had written a claim of its own that it could not give back, `run` rejects
 * instead with the `StoreUnavailableError` whose `writtenClaim` names it.
 */
export interface ConflictResult {
  readonly outcome: 'CONFLICT';
  /** The holder's remaining lease, in milliseconds. */
  readonly retryAfterMs: number;
  readonly fencingToken: number;
  readonly attempt: number;
}

/** The key was first used with another payload, a producer bug. The handler did not run. */
export interface PayloadMismatchResult {
  readonly outcome: 'PAYLOAD_MISMATCH';
  readonly state: RecordState;
  readonly fencingToken: number;
  readonly attempt: number;
}

/** The record is FAILED for good from an earlier attempt. The handler did not run. */
export interface FailedRecordResult {
  readonly outcome: 'FAILED';
  /** The error recorded when it failed. */
  readonly error: string;
  /**
   * `true` once an adapter marked the record dead-lettered with `Idempotency.markDeadLettered`. Settle this
   * delivery without sending another dead-letter copy.
   */
  readonly deadLettered: boolean;
  readonly fencingToken: number;
  readonly attempt: number;
}

/**
 * Only with `storeFailureMode: 'open'`. The store did not answer the claim, and the handler ran without
 * protection. Never after a CONFLICT, because a store that stops answering during the `conflictWaitMs` wait
 * runs nothing, see {@link ConflictResult}.
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

/** What {@link Idempotency.run} resolves with, one variant per outcome, told apart by `outcome`. */
export type RunResult<T> =
  | ExecutionResult<T>
  | DuplicateResult<T>
  | ConflictResult
  | PayloadMismatchResult
  | FailedRecordResult
  | UnprotectedResult<T>;

/** Every `outcome` a {@link RunResult} can carry. */
export type RunOutcome = ClaimOutcome | 'UNPROTECTED';
