import type { BackoffOptions, RunResult } from '@idempotent-consumer/core';
import {
  type PipelineDecision as CoreDecision,
  decide as coreDecide,
  type DeadLetterDecision,
} from '@idempotent-consumer/core/kit';
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

/**
 * The RabbitMQ action of the core's decision (docs/design.md#outcome-to-broker-action, RabbitMQ column):
 * `retry` goes to the delay tier of its delay (a CONFLICT's capped at `maxConflictDelayMs`), `leave` is a
 * `requeue`. Pure.
 */
export function toRabbitMqDecision(decision: CoreDecision, policy: DecisionPolicy): Decision {
  switch (decision.action) {
    case 'ack':
    case 'dead-letter':
      return decision;
    case 'retry': {
      const conflict = decision.reason === 'conflict';
      const wantedDelayMs = conflict ? Math.max(1, decision.delayMs) : decision.delayMs;
      const capMs = conflict ? policy.maxConflictDelayMs : undefined;
      return {
        action: 'retry',
        reason: decision.reason,
        wantedDelayMs,
        delayMs: pickDelayTier(policy.delayTiersMs, wantedDelayMs, capMs),
        attempt: decision.attempt,
        error: decision.error,
      };
    }
    case 'leave':
      return decision.reason === 'abandoned'
        ? { action: 'leave', reason: 'abandoned' }
        : { action: 'requeue', reason: REQUEUE_REASON[decision.reason] };
  }
}

const REQUEUE_REASON = {
  'store-unavailable': 'store-unavailable',
  error: 'store-error',
  stopping: 'stopping',
  'dead-letter-failed': 'publish-failed',
} as const satisfies Record<
  Exclude<Extract<CoreDecision, { action: 'leave' }>['reason'], 'abandoned'>,
  RequeueReason
>;

/**
 * Maps a runner result to a broker decision: the core's {@link coreDecide}, then
 * {@link toRabbitMqDecision}. Pure, given `policy.random`.
 * @param unprotectedAttempt - for UNPROTECTED results: the attempt number from the message header, + 1.
 */
export function decide(result: RunResult<unknown>, policy: DecisionPolicy, unprotectedAttempt = 1): Decision {
  const core = { ...policy, isRetryable: policy.isRetryable ?? (() => true) };
  return toRabbitMqDecision(coreDecide(result, core, unprotectedAttempt), policy);
}
