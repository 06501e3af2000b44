import { type BackoffOptions, computeBackoffMs, type RunResult } from '@idempotent-consumer/core';
import { type DeadLetterDecision, deadLetterOf, unprotectedDeadLetter } from '@idempotent-consumer/core/kit';

/** What {@link decide} needs besides the result: the wrapper's resolved retry settings. */
export interface DecisionPolicy {
  /** Backoff of a retry, by attempt (`computeBackoffMs`). */
  readonly retryBackoff: BackoffOptions;
  /** Delays up to this many milliseconds are waited inline (`retry`); longer ones pause the partition. */
  readonly maxInlineDelayMs: number;
  /** Cap of the pause after a CONFLICT that outlived the wait for the holder, in milliseconds. */
  readonly maxConflictDelayMs: number;
  /** Runs of an UNPROTECTED message (no record counts them) before it is dead-lettered. */
  readonly maxAttempts: number;
  /** Whether a handler error is worth a retry (the runner's `isRetryable`), for UNPROTECTED runs. */
  readonly isRetryable: (error: unknown) => boolean;
}

/** Why a message runs again later. */
export type RetryReason = 'handler-error' | 'conflict' | 'lease-lost';

/**
 * What the wrapper does with one message (docs/design.md#outcome-to-broker-action, Kafka column):
 * - `resolve`: let its offset resolve (the handler completed, a proven duplicate, a FAILED record already
 *   dead-lettered, an unprotected run that completed, a lease lost after the handler completed);
 * - `retry`: wait `delayMs` inline (heartbeating), then claim again; the offset stays unresolved meanwhile;
 * - `pause`: pause the partition for `delayMs` and leave the offset unresolved (`delayMs` `undefined`:
 *   pause the topic until the store answers);
 * - `dead-letter`: send a copy to the dead-letter topic, then resolve.
 */
export type Decision =
  | {
      readonly action: 'resolve';
      readonly reason: 'completed' | 'duplicate' | 'dead-lettered-before' | 'unprotected' | 'lease-lost';
    }
  | {
      readonly action: 'retry';
      readonly reason: RetryReason;
      readonly delayMs: number;
      readonly error: unknown;
    }
  | {
      readonly action: 'pause';
      readonly reason: RetryReason | 'store-unavailable' | 'store-error' | 'dead-letter-failed';
      /** `undefined`: until the store answers a ping. */
      readonly delayMs: number | undefined;
      readonly error: unknown;
    }
  | DeadLetterDecision;

/** A wait of `delayMs` for `reason`: inline up to `maxInlineDelayMs`, else a partition pause. */
export function retryAfter(
  reason: RetryReason,
  delayMs: number,
  error: unknown,
  policy: DecisionPolicy,
): Decision {
  return delayMs > policy.maxInlineDelayMs
    ? { action: 'pause', reason, delayMs, error }
    : { action: 'retry', reason, delayMs, error };
}

/**
 * Maps a run result to what Kafka sees. Pure: every wait, send and write it asks for is carried out
 * elsewhere (`message-processor.ts`, `dead-letter-sender.ts`, `partition-pauser.ts`).
 * - completed / DUPLICATE / FAILED already dead-lettered: resolve;
 * - released (retryable error): retry after `computeBackoffMs(attempt, retryBackoff)`;
 * - failed now, PAYLOAD_MISMATCH, FAILED not yet dead-lettered: dead-letter;
 * - CONFLICT still held after the wait for the holder: pause for `min(retryAfterMs, maxConflictDelayMs)`,
 *   at least 100 ms;
 * - lease lost: after the handler completed, resolve (the work is done); before, claim again at once;
 * - UNPROTECTED: completed, resolve; threw, retry with backoff, or dead-letter once `maxAttempts` runs
 *   threw (`unprotectedAttempt` counts them) or the error is not retryable.
 * @param unprotectedAttempt - for UNPROTECTED results: which run this was, 1 for the first.
 */
export function decide(result: RunResult<unknown>, policy: DecisionPolicy, unprotectedAttempt = 1): Decision {
  const backoff = (attempt: number) => computeBackoffMs(attempt, policy.retryBackoff);
  switch (result.outcome) {
    case 'DUPLICATE':
      return { action: 'resolve', reason: 'duplicate' };
    case 'CONFLICT': {
      const delayMs = Math.max(100, Math.min(result.retryAfterMs, policy.maxConflictDelayMs));
      return { action: 'pause', reason: 'conflict', delayMs, error: undefined };
    }
    case 'PAYLOAD_MISMATCH':
      return deadLetterOf(result)!;
    case 'FAILED':
      // Dead-lettered by an earlier delivery (a re-fetch after a rebalance or a crash): settled, no copy.
      return deadLetterOf(result) ?? { action: 'resolve', reason: 'dead-lettered-before' };
    case 'UNPROTECTED': {
      if (result.status === 'completed') return { action: 'resolve', reason: 'unprotected' };
      return (
        unprotectedDeadLetter(result.error, unprotectedAttempt, policy) ??
        retryAfter('handler-error', backoff(unprotectedAttempt), result.error, policy)
      );
    }
    default:
      switch (result.status) {
        case 'completed':
          return { action: 'resolve', reason: 'completed' };
        case 'released':
          return retryAfter('handler-error', backoff(result.attempt), result.error, policy);
        case 'failed':
          return deadLetterOf(result)!;
        case 'lease-lost':
          if (result.handlerCompleted) return { action: 'resolve', reason: 'lease-lost' };
          // The handler threw (or never started) and the claim is gone: the record's state rules; claim again.
          return { action: 'retry', reason: 'lease-lost', delayMs: 0, error: result.error };
      }
  }
}
