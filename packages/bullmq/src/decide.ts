import type { PipelineDecision as CoreDecision, DeadLetterDecision } from '@idempotent-consumer/core/kit';

/** How long a job the processor could not take on waits in delayed, in milliseconds, so it never spins. */
export const BACK_IN_QUEUE_MS = 1000;

/**
 * What the processor does with one job, in BullMQ's terms, as the BullMQ column of
 * docs/design.md#outcome-to-broker-action says.
 * - `complete` returns the result, a duplicate's stored one, and BullMQ completes the job.
 * - `retry` rethrows the handler's error with attempts left, and BullMQ retries with its `backoff`.
 * - `fail` rethrows the handler's error on the job's last attempt, and BullMQ fails the job. The record
 *   is released, so a retry of the job runs the handler again.
 * - `dead-letter` throws an `UnrecoverableError` with the dead-letter fields, and BullMQ fails the job.
 * - `delay` moves the job to delayed for `delayMs` and throws a `DelayedError`. No attempt is spent.
 */
export type Decision =
  | { readonly action: 'complete'; readonly reason: 'completed' | 'duplicate' | 'unprotected' | 'lease-lost' }
  | Rethrown<'retry'>
  | Rethrown<'fail'>
  | DeadLetterDecision
  | {
      readonly action: 'delay';
      /** `conflict` when another worker holds the key, else why the job was not run to its end. */
      readonly reason: 'conflict' | LeaveReason;
      /** How long the job waits in delayed, in milliseconds. */
      readonly delayMs: number;
    };

/** Why a message goes back to the broker as it came: the core's decision's `leave` reasons. */
export type LeaveReason = Extract<CoreDecision, { action: 'leave' }>['reason'];

/** A handler error the processor rethrows. BullMQ then retries the job, or fails it on its last attempt. */
export interface Rethrown<A extends 'retry' | 'fail'> {
  readonly action: A;
  readonly reason: 'handler-error' | 'lease-lost';
  /** The attempt that ended: the record's, or the count of runs without a claim. */
  readonly attempt: number;
  /** What the handler threw. */
  readonly error: unknown;
}

/** Whether BullMQ retries `job` after a failed run, which it does while `attemptsMade + 1 < attempts`. */
export function hasAttemptsLeft(job: {
  readonly attemptsMade: number;
  readonly opts: { readonly attempts?: number };
}): boolean {
  return job.attemptsMade + 1 < Math.max(1, job.opts.attempts ?? 1);
}

/**
 * The BullMQ action of the core's decision. A FAILED record dead-lettered before is dead-lettered again
 * as `failed-record`, since the job must fail, not complete. Pure.
 * @param attemptsLeft - whether BullMQ retries the job after a throw ({@link hasAttemptsLeft}).
 * @param subjectAttempt - the record's attempt, for a FAILED record dead-lettered before.
 */
export function toBullMqDecision(
  decision: CoreDecision,
  attemptsLeft: boolean,
  subjectAttempt = 0,
): Decision {
  switch (decision.action) {
    case 'ack':
      if (decision.reason !== 'dead-lettered-before') return { action: 'complete', reason: decision.reason };
      return {
        action: 'dead-letter',
        reason: 'failed-record',
        attempt: subjectAttempt,
        error: 'The record of this key is FAILED and was dead-lettered before',
        failedFencingToken: undefined,
      };
    case 'dead-letter':
      return decision;
    case 'retry': {
      if (decision.reason === 'conflict') {
        return { action: 'delay', reason: 'conflict', delayMs: Math.max(1, decision.delayMs) };
      }
      const { reason, attempt, error } = decision;
      return attemptsLeft
        ? { action: 'retry', reason, attempt, error }
        : { action: 'fail', reason, attempt, error };
    }
    case 'leave':
      return {
        action: 'delay',
        reason: decision.reason,
        delayMs: decision.reason === 'stopping' ? 0 : BACK_IN_QUEUE_MS,
      };
  }
}
