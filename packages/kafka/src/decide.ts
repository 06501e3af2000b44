import type { BackoffOptions, RunResult } from '@idempotent-consumer/core';
import {
  decide as coreDecide,
  type DeadLetterDecision,
  type PipelineDecision,
} from '@idempotent-consumer/core/kit';

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
 * What Kafka sees of the core's decision (docs/design.md#outcome-to-broker-action, Kafka column): a
 * retry after a handler error waits inline up to `maxInlineDelayMs`, else pauses the partition; a CONFLICT
 * pauses it for `max(100 ms, delay)`; a lost claim is claimed again at once; a message that goes back
 * pauses the partition one backoff step (the topic until the store answers). `stop` when the delivery
 * ended: nothing is resolved. Pure.
 */
export function toKafkaDecision(decision: PipelineDecision, policy: DecisionPolicy): Decision | 'stop' {
  switch (decision.action) {
    case 'ack':
      return { action: 'resolve', reason: decision.reason };
    case 'dead-letter':
      return decision;
    case 'retry':
      if (decision.reason === 'conflict') {
        return {
          action: 'pause',
          reason: 'conflict',
          delayMs: Math.max(100, decision.delayMs),
          error: undefined,
        };
      }
      if (decision.reason === 'lease-lost') {
        // The claim is gone: the record's state rules; claim again.
        return { action: 'retry', reason: 'lease-lost', delayMs: 0, error: decision.error };
      }
      return retryAfter('handler-error', decision.delayMs, decision.error, policy);
    case 'leave': {
      const { reason, error } = decision;
      if (reason === 'stopping' || reason === 'abandoned') return 'stop';
      if (reason === 'store-unavailable') return { action: 'pause', reason, delayMs: undefined, error };
      const delayMs = policy.retryBackoff.baseMs ?? 1000;
      return { action: 'pause', reason: reason === 'error' ? 'store-error' : reason, delayMs, error };
    }
  }
}

/**
 * Maps a run result to what Kafka sees: the core's {@link coreDecide}, then {@link toKafkaDecision}.
 * @param unprotectedAttempt - for UNPROTECTED results: which run this was, 1 for the first.
 */
export function decide(result: RunResult<unknown>, policy: DecisionPolicy, unprotectedAttempt = 1): Decision {
  return toKafkaDecision(coreDecide(result, policy, unprotectedAttempt), policy) as Decision;
}
