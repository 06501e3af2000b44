import { describeError } from '@idempotent-consumer/core';
import type { DeadLetterDecision, PipelineDecision } from '@idempotent-consumer/core/kit';

/** Why a message is acked: completed, a duplicate, dead-lettered before, unprotected, or lease lost after it completed. */
export type AckReason = Extract<PipelineDecision, { action: 'ack' }>['reason'];
/** Why a message runs again: a handler error, a CONFLICT still held, or a claim lost. */
export type RetryReason = Extract<PipelineDecision, { action: 'retry' }>['reason'];
/** Why a message goes back unchanged: the store down, an error, stopping, abandoned, a dead letter that failed. */
export type LeaveReason = Extract<PipelineDecision, { action: 'leave' }>['reason'];

/** Why a message was nak'ed: a retry, or it could not run now. */
export type NakReason = RetryReason | Exclude<LeaveReason, 'abandoned'>;

/**
 * What JetStream sees of one message (docs/design.md#outcome-to-broker-action, NATS column):
 * - `ack`: completed, a duplicate, a FAILED record dead-lettered before, an unprotected run, or a claim
 *   lost after its handler completed;
 * - `nak`: delivered again after `delayMs`: a CONFLICT, a retryable error, a lost claim, or a message
 *   that could not run now (store down, stopping, a dead letter that failed);
 * - `dead-letter`: a copy goes to the dead-letter subject, then `term()`;
 * - `leave`: nothing is sent (`stop()` abandoned it): it comes back after `ack_wait`.
 */
export type Decision =
  | { readonly action: 'ack'; readonly reason: AckReason }
  | { readonly action: 'nak'; readonly reason: NakReason; readonly delayMs: number }
  | DeadLetterDecision
  | { readonly action: 'leave'; readonly reason: 'abandoned' };

/** What {@link toNatsDecision} needs besides the decision. */
export interface DecisionPolicy {
  /** The consumer's `max_deliver`; -1 or 0 for no limit. */
  readonly maxDeliver: number;
  /** The `nak` delay of a message that could not run now, in milliseconds. */
  readonly requeueDelayMs: number;
}

/**
 * The JetStream action of the core's decision for a message delivered `deliveryCount` times. A message
 * on its last delivery (`max_deliver`) is dead-lettered instead of nak'ed: JetStream would drop it. Pure.
 */
export function toNatsDecision(
  decision: PipelineDecision,
  deliveryCount: number,
  policy: DecisionPolicy,
): Decision {
  if (decision.action === 'ack' || decision.action === 'dead-letter') return decision;
  let reason: NakReason;
  let delayMs: number;
  if (decision.action === 'retry') {
    reason = decision.reason;
    delayMs = Math.max(reason === 'conflict' ? 1 : 0, decision.delayMs);
  } else if (decision.reason === 'abandoned') {
    return { action: 'leave', reason: 'abandoned' };
  } else {
    reason = decision.reason;
    delayMs = reason === 'stopping' ? 0 : policy.requeueDelayMs;
  }
  if (policy.maxDeliver <= 0 || deliveryCount < policy.maxDeliver) {
    return { action: 'nak', reason, delayMs };
  }
  const retry = decision.action === 'retry';
  const why = retry && decision.error !== undefined ? describeError(decision.error) : decision.reason;
  return {
    action: 'dead-letter',
    reason: 'attempts-exhausted',
    attempt: retry ? decision.attempt : 0,
    error: `JetStream delivers it no more (max_deliver ${policy.maxDeliver}): ${why}`,
    failedFencingToken: undefined,
  };
}
