import {
  type BackoffOptions,
  computeBackoffMs,
  type DeadLetterReason,
  deadLetterReasonOf,
  describeError,
  type RunResult,
} from '@idempotent-consumer/core';
import { pickDelayTier } from './delay-tiers';

/**
 * Why a message was dead-lettered (header `x-idempotency-dead-letter-reason`): the core's vocabulary,
 * shared by every adapter, re-exported so `@idempotent-consumer/rabbitmq` imports keep working.
 */
export type { DeadLetterReason };

/** Why a message was sent to a delay tier (header `x-idempotency-retry-reason`). */
export type RetryReason = 'conflict' | 'handler-error' | 'lease-lost';

/** Why a delivery was acked without being republished. */
export type AckReason = 'completed' | 'duplicate' | 'lease-lost' | 'unprotected';

/** What the broker sees for one delivery: the RabbitMQ column of DESIGN.md, "Outcome → broker action". */
export type BrokerAction =
  | { readonly kind: 'ack'; readonly reason: AckReason }
  | {
      readonly kind: 'delay';
      readonly reason: RetryReason;
      /** The delay tier, in milliseconds. */
      readonly delayMs: number;
      /** The delay wanted before rounding up to a tier, in milliseconds. */
      readonly wantedDelayMs: number;
      readonly attempt: number;
      readonly error: string | undefined;
    }
  | {
      readonly kind: 'dead-letter';
      readonly reason: DeadLetterReason;
      readonly attempt: number;
      readonly error: string;
    };

/** What {@link decideAction} needs besides the result. */
export interface DecisionPolicy {
  readonly delayTiersMs: readonly number[];
  readonly retryBackoff: BackoffOptions;
  /** Most attempts, for unprotected runs (the runner enforces it for protected ones). */
  readonly maxAttempts: number;
  /** Injectable randomness for the backoff jitter. */
  readonly random?: () => number;
}

function delay(
  reason: RetryReason,
  wantedDelayMs: number,
  attempt: number,
  error: unknown,
  policy: DecisionPolicy,
): BrokerAction {
  return {
    kind: 'delay',
    reason,
    wantedDelayMs,
    delayMs: pickDelayTier(policy.delayTiersMs, wantedDelayMs),
    attempt,
    error: error === undefined ? undefined : describeError(error),
  };
}

/**
 * A dead-letter action for a result the core classifies as dead-lettered ({@link deadLetterReasonOf}:
 * FAILED now, PAYLOAD_MISMATCH, an earlier FAILED record).
 */
function deadLetter(result: RunResult<unknown>, attempt: number, error: string): BrokerAction {
  return { kind: 'dead-letter', reason: deadLetterReasonOf(result)!, attempt, error };
}

function backoff(attempt: number, policy: DecisionPolicy): number {
  return computeBackoffMs(attempt, policy.retryBackoff, policy.random);
}

/**
 * Maps a runner result to a broker action (DESIGN.md, "Outcome → broker action", RabbitMQ column):
 * - ACQUIRED / ACQUIRED_STALE and the handler completed: ack (COMPLETED is already written);
 * - handler threw a retryable error (record RELEASED): delay tier with a backoff on the record's attempt;
 * - record FAILED now (attempts exhausted, non-retryable, result too large): dead-letter;
 * - lease lost: the handler completed, ack (another delivery owns the key now); it threw, delay tier;
 * - DUPLICATE: ack; CONFLICT: delay tier for the holder's remaining lease (rounded up to a tier, bounded
 *   by the longest), never an immediate requeue;
 * - PAYLOAD_MISMATCH and an earlier FAILED record: dead-letter, the handler never ran;
 * - UNPROTECTED (store failure mode `open`, or a missing key processed): completed, ack; threw, a delay
 *   tier, or dead-letter once `maxAttempts` (counted in a header) is reached or the error is not retryable.
 *
 * @param unprotectedAttempt - for UNPROTECTED results: the attempt number from the message header, + 1.
 * @param isRetryable - for UNPROTECTED results: the runner's `isRetryable`.
 */
export function decideAction(
  result: RunResult<unknown>,
  policy: DecisionPolicy,
  unprotectedAttempt = 1,
  isRetryable: (error: unknown) => boolean = () => true,
): BrokerAction {
  switch (result.outcome) {
    case 'DUPLICATE':
      return { kind: 'ack', reason: 'duplicate' };
    case 'CONFLICT':
      return delay('conflict', Math.max(1, result.retryAfterMs), result.attempt, undefined, policy);
    case 'PAYLOAD_MISMATCH':
      return deadLetter(
        result,
        result.attempt,
        `The idempotency key was first used with another payload (record ${result.state})`,
      );
    case 'FAILED':
      return deadLetter(result, result.attempt, result.error);
    case 'UNPROTECTED': {
      if (result.status === 'completed') return { kind: 'ack', reason: 'unprotected' };
      if (!isRetryable(result.error) || unprotectedAttempt >= policy.maxAttempts) {
        return {
          kind: 'dead-letter',
          reason: isRetryable(result.error) ? 'attempts-exhausted' : 'non-retryable',
          attempt: unprotectedAttempt,
          error: describeError(result.error),
        };
      }
      return delay(
        'handler-error',
        backoff(unprotectedAttempt, policy),
        unprotectedAttempt,
        result.error,
        policy,
      );
    }
    default:
      switch (result.status) {
        case 'completed':
          return { kind: 'ack', reason: 'completed' };
        case 'released':
          return delay(
            'handler-error',
            backoff(result.attempt, policy),
            result.attempt,
            result.error,
            policy,
          );
        case 'failed':
          return deadLetter(result, result.attempt, describeError(result.error));
        case 'lease-lost':
          if (result.handlerCompleted) return { kind: 'ack', reason: 'lease-lost' };
          return delay('lease-lost', backoff(result.attempt, policy), result.attempt, result.error, policy);
      }
  }
}
