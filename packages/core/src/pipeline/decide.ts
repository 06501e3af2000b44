import { type BackoffOptions, computeBackoffMs } from '../backoff';
import { type DeadLetterDecision, deadLetterOf, unprotectedDeadLetter } from '../dead-letter';
import type { RunResult } from '../runner/run-result';

/** Why a message ends for good without a copy. */
export type AckReason = 'completed' | 'duplicate' | 'dead-lettered-before' | 'unprotected' | 'lease-lost';

/** Why a message runs again later. */
export type RetryReason = 'handler-error' | 'conflict' | 'lease-lost';

/** Why a message goes back to the broker as it came, to be delivered again. */
export type LeaveReason = 'store-unavailable' | 'error' | 'stopping' | 'abandoned' | 'dead-letter-failed';

/**
 * What the broker should do with one message, in no broker's terms. Each port turns it into its own
 * action (docs/design.md#outcome-to-broker-action):
 * - `ack`: the message is done (ack, offset resolved, delete);
 * - `retry`: it runs again after `delayMs` (delay tier, partition pause, visibility timeout);
 * - `dead-letter`: a copy goes to the dead-letter destination, then the message is done;
 * - `leave`: it goes back to the broker unchanged (requeue, offset unresolved, visibility left to lapse).
 */
export type Decision =
  | { readonly action: 'ack'; readonly reason: AckReason }
  | {
      readonly action: 'retry';
      readonly reason: RetryReason;
      /** How long to wait before the next run, in milliseconds. */
      readonly delayMs: number;
      /** The attempt that ended: the record's, or the count of runs without a claim. */
      readonly attempt: number;
      /** What the handler threw; `undefined` for a CONFLICT. */
      readonly error: unknown;
    }
  | DeadLetterDecision
  | { readonly action: 'leave'; readonly reason: LeaveReason; readonly error?: unknown };

/** What {@link decide} needs besides the result: the consumer's retry settings. */
export interface DecisionPolicy {
  /** Backoff of a retry, by attempt. */
  readonly retryBackoff: BackoffOptions;
  /** Cap of the delay after a CONFLICT that outlived the wait for the holder, in milliseconds. */
  readonly maxConflictDelayMs: number;
  /** Runs of a message without a claim before it is dead-lettered (the runner bounds claimed ones). */
  readonly maxAttempts: number;
  /** Whether a handler error is worth a retry, for runs without a claim. A predicate that throws says yes. */
  readonly isRetryable: (error: unknown) => boolean;
  /** Randomness of the backoff jitter, injectable for tests. @defaultValue Math.random */
  readonly random?: () => number;
}

/**
 * Maps a run's result to a {@link Decision}. Pure: the same input gives the same decision (given
 * `policy.random`).
 * - completed, DUPLICATE, a FAILED record already dead-lettered: `ack`;
 * - released (a retryable error): `retry` after the backoff of its attempt;
 * - failed now, PAYLOAD_MISMATCH, a FAILED record not yet dead-lettered: `dead-letter`;
 * - CONFLICT still held after the wait for the holder: `retry` after `min(retryAfterMs, maxConflictDelayMs)`;
 * - lease lost: `ack` when the handler completed (another claim owns the key now), else `retry`;
 * - UNPROTECTED: completed, `ack`; threw, `retry`, or `dead-letter` once `maxAttempts` runs threw or the
 *   error is not retryable.
 * @param unprotectedAttempt - for UNPROTECTED results: which run this was, 1 for the first.
 */
export function decide(result: RunResult<unknown>, policy: DecisionPolicy, unprotectedAttempt = 1): Decision {
  const backoff = (attempt: number) => computeBackoffMs(attempt, policy.retryBackoff, policy.random);
  switch (result.outcome) {
    case 'DUPLICATE':
      return { action: 'ack', reason: 'duplicate' };
    case 'CONFLICT': {
      const delayMs = Math.min(result.retryAfterMs, policy.maxConflictDelayMs);
      return { action: 'retry', reason: 'conflict', delayMs, attempt: result.attempt, error: undefined };
    }
    case 'PAYLOAD_MISMATCH':
      return deadLetterOf(result)!;
    case 'FAILED':
      return deadLetterOf(result) ?? { action: 'ack', reason: 'dead-lettered-before' };
    case 'UNPROTECTED': {
      if (result.status === 'completed') return { action: 'ack', reason: 'unprotected' };
      const isRetryable = (error: unknown) => retryable(policy, error);
      const letter = unprotectedDeadLetter(result.error, unprotectedAttempt, { ...policy, isRetryable });
      if (letter) return letter;
      const delayMs = backoff(unprotectedAttempt);
      return {
        action: 'retry',
        reason: 'handler-error',
        delayMs,
        attempt: unprotectedAttempt,
        error: result.error,
      };
    }
    default:
      switch (result.status) {
        case 'completed':
          return { action: 'ack', reason: 'completed' };
        case 'released': {
          const { attempt, error } = result;
          return { action: 'retry', reason: 'handler-error', delayMs: backoff(attempt), attempt, error };
        }
        case 'failed':
          return deadLetterOf(result)!;
        case 'lease-lost': {
          if (result.handlerCompleted) return { action: 'ack', reason: 'lease-lost' };
          const { attempt, error } = result;
          return { action: 'retry', reason: 'lease-lost', delayMs: backoff(attempt), attempt, error };
        }
      }
  }
}

function retryable(policy: DecisionPolicy, error: unknown): boolean {
  try {
    return policy.isRetryable(error) !== false;
  } catch {
    return true;
  }
}
