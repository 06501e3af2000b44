import { type BackoffOptions, computeBackoffMs, type RunResult } from '@idempotent-consumer/core';
import { type DeadLetterDecision, deadLetterOf, unprotectedDeadLetter } from '@idempotent-consumer/core/kit';
import { pickDelayTier } from './delay-tiers';

/** Why a message was sent to a delay tier (header `x-idempotency-retry-reason`). */
export type RetryReason = 'conflict' | 'handler-error' | 'lease-lost';

/** Why a delivery was acked without being republished. */
export type AckReason = 'completed' | 'duplicate' | 'lease-lost' | 'unprotected' | 'dead-lettered-before';

/**
 * Why a delivery was given back to the queue (`nack` with requeue) instead of settled for good: the store
 * did not answer its claim (`store-unavailable`), the store answered with an error that is not an outage
 * (`store-error`, requeued after the shortest delay tier, consumption goes on), it arrived while consumption was paused or stopping, its
 * republish failed (`publish-failed`), or this adapter failed (`internal-error`, requeued after the shortest
 * delay tier too).
 */
export type RequeueReason =
  | 'store-unavailable'
  | 'store-error'
  | 'paused'
  | 'stopping'
  | 'publish-failed'
  | 'internal-error';

/**
 * What the broker sees for one delivery: the RabbitMQ column of docs/design.md#outcome-to-broker-action.
 * - `ack`: the handler completed, the message is a duplicate, or it ran unprotected;
 * - `retry`: a copy goes to the delay tier `delayMs` (publisher-confirmed), then the original is acked;
 * - `dead-letter`: a copy goes to the dead-letter exchange (confirmed), then the original is acked;
 * - `requeue`: `nack` with requeue; the broker delivers the message again;
 * - `leave`: nothing is sent for it, it stays unacked: `stop()` gave up on it when `stopTimeoutMs` ran out
 *   (`abandoned`), and the broker redelivers it once its channel closes. Never a decision of
 *   the run's result: only the `settled` event of an abandoned delivery carries it, as the SQS poller's
 *   `leave`/`abandoned`.
 */
export type Decision =
  | { readonly action: 'ack'; readonly reason: AckReason }
  | {
      readonly action: 'retry';
      readonly reason: RetryReason;
      /** The delay tier, in milliseconds. */
      readonly delayMs: number;
      /** The delay wanted before rounding up to a tier, in milliseconds. */
      readonly wantedDelayMs: number;
      readonly attempt: number;
      /**
       * What the handler threw (`undefined` for a CONFLICT), as in the Kafka and SQS adapters; the copy
       * carries it described (`x-idempotency-error`: `Name [CODE]: message`).
       */
      readonly error: unknown;
    }
  | DeadLetterDecision
  | { readonly action: 'requeue'; readonly reason: RequeueReason }
  | { readonly action: 'leave'; readonly reason: 'abandoned' };

/** What {@link decide} needs besides the result: the consumer's retry settings. */
export interface DecisionPolicy {
  /** The delay tiers' TTLs in milliseconds, sorted ascending. */
  readonly delayTiersMs: readonly number[];
  readonly retryBackoff: BackoffOptions;
  /** Most attempts, for unprotected runs (the runner enforces it for protected ones). */
  readonly maxAttempts: number;
  /** The longest redelivery delay of a CONFLICT, in milliseconds (`maxConflictDelayMs`). */
  readonly maxConflictDelayMs: number;
  /** For unprotected runs: whether an error may be retried (the runner's `isRetryable`). @defaultValue always */
  readonly isRetryable?: (error: unknown) => boolean;
  /** Injectable randomness for the backoff jitter. @defaultValue Math.random */
  readonly random?: () => number;
}

function retry(
  reason: RetryReason,
  wantedDelayMs: number,
  attempt: number,
  error: unknown,
  policy: DecisionPolicy,
  capMs?: number,
): Decision {
  return {
    action: 'retry',
    reason,
    wantedDelayMs,
    delayMs: pickDelayTier(policy.delayTiersMs, wantedDelayMs, capMs),
    attempt,
    error,
  };
}

function backoff(attempt: number, policy: DecisionPolicy): number {
  return computeBackoffMs(attempt, policy.retryBackoff, policy.random);
}

/**
 * Maps a runner result to a broker decision (docs/design.md#outcome-to-broker-action, RabbitMQ column).
 * Pure: no I/O, the same input gives the same decision (given `policy.random`).
 * - ACQUIRED / ACQUIRED_STALE and the handler completed: ack (COMPLETED is already written);
 * - handler threw a retryable error (record RELEASED): retry through a delay tier with a backoff on the
 *   record's attempt;
 * - record FAILED now (attempts exhausted, non-retryable, result too large): dead-letter;
 * - lease lost: the handler completed, ack (another delivery owns the key now); it threw, retry;
 * - DUPLICATE: ack; CONFLICT (still held after the runner's `conflictWaitMs` wait for the holder's
 *   outcome): retry after the holder's remaining lease capped at `maxConflictDelayMs` (rounded up to a
 *   tier not longer than the cap), never an immediate requeue;
 * - PAYLOAD_MISMATCH and an earlier FAILED record: dead-letter, the handler never ran (a FAILED record
 *   already marked dead-lettered: ack, its copy is in the dead-letter exchange);
 * - UNPROTECTED (store failure mode `open`, or a missing key processed): completed, ack; threw, retry, or
 *   dead-letter once `maxAttempts` (counted in a header) is reached or the error is not retryable.
 *
 * @param unprotectedAttempt - for UNPROTECTED results: the attempt number from the message header, + 1.
 */
export function decide(result: RunResult<unknown>, policy: DecisionPolicy, unprotectedAttempt = 1): Decision {
  switch (result.outcome) {
    case 'DUPLICATE':
      return { action: 'ack', reason: 'duplicate' };
    case 'CONFLICT':
      // The runner already waited `conflictWaitMs` for the holder's outcome; it still runs.
      return retry(
        'conflict',
        Math.max(1, Math.min(result.retryAfterMs, policy.maxConflictDelayMs)),
        result.attempt,
        undefined,
        policy,
        policy.maxConflictDelayMs,
      );
    case 'PAYLOAD_MISMATCH':
      return deadLetterOf(result)!;
    case 'FAILED':
      // Dead-lettered by an earlier delivery (its copy is in the dead-letter exchange): settled, no copy.
      return deadLetterOf(result) ?? { action: 'ack', reason: 'dead-lettered-before' };
    case 'UNPROTECTED': {
      if (result.status === 'completed') return { action: 'ack', reason: 'unprotected' };
      const isRetryable = policy.isRetryable ?? (() => true);
      const letter = unprotectedDeadLetter(result.error, unprotectedAttempt, { ...policy, isRetryable });
      if (letter) return letter;
      return retry(
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
          return { action: 'ack', reason: 'completed' };
        case 'released':
          return retry(
            'handler-error',
            backoff(result.attempt, policy),
            result.attempt,
            result.error,
            policy,
          );
        case 'failed':
          return deadLetterOf(result)!;
        case 'lease-lost':
          if (result.handlerCompleted) return { action: 'ack', reason: 'lease-lost' };
          return retry('lease-lost', backoff(result.attempt, policy), result.attempt, result.error, policy);
      }
  }
}
