import {
  type BackoffOptions,
  computeBackoffMs,
  type DeadLetterReason,
  describeError,
  type RunResult,
} from '@idempotent-consumer/core';
import {
  decide as coreDecide,
  type DeadLetterDecision,
  type PipelineDecision,
} from '@idempotent-consumer/core/kit';
import { toVisibilitySeconds } from './message-attributes';

/** Why a message was dead-lettered: the core's vocabulary, shared by every adapter. */
export type { DeadLetterReason };

/**
 * What happened to one message before any SQS request, the input of {@link decide}:
 * - `run`: the runner answered (a claim settled without running, an execution, or an unprotected run);
 * - `missing-key`: no idempotency key and `missingKey: 'dead-letter'`;
 * - `invalid-key`: the key extractor threw, or the runner refused the key;
 * - `store-unavailable`: the store did not answer the claim (fail closed);
 * - `fifo-blocked`: an earlier message of its FIFO group in the same batch did not finish;
 * - `stopping`: the consumer was stopping (the poller's `stop()`, the wiring's `close()`) before its
 *   handler started (a claim it had was given back);
 * - `abandoned`: `stop()` gave up on it before its handler started (its claim was given back);
 * - `error`: an unexpected error (reported as `brokerError` by the caller).
 * `receiveCount` is the message's `ApproximateReceiveCount` (1 when unknown).
 */
export type MessageResult<T> = { readonly receiveCount: number } & (
  | { readonly kind: 'run'; readonly result: RunResult<T> }
  | { readonly kind: 'missing-key'; readonly error: unknown }
  | { readonly kind: 'invalid-key'; readonly error: unknown }
  | { readonly kind: 'store-unavailable'; readonly error: unknown }
  | { readonly kind: 'fifo-blocked' }
  | { readonly kind: 'stopping' }
  | { readonly kind: 'abandoned' }
  | { readonly kind: 'error'; readonly error: unknown }
);

/**
 * What the adapter does with one message (docs/design.md#outcome-to-broker-action, SQS column):
 * - `delete`: the handler completed (`completed`), the key already completed (`duplicate`), it ran
 *   without protection and returned (`unprotected`), or its FAILED record was dead-lettered already (a copy
 *   is in the dead-letter queue: `dead-lettered-before`);
 * - `change-visibility`: it comes back after `visibilityTimeoutSeconds`: another worker holds the lease
 *   (`conflict`), the handler threw a retryable error (`handler-error`, as in the RabbitMQ and Kafka
 *   adapters), an earlier message of its FIFO group did not finish (`fifo-blocked`, 0 s), or the consumer
 *   was stopping before its handler started (`stopping`, 0 s: another consumer takes it at once);
 * - `dead-letter`: a copy goes to the dead-letter queue and the message is deleted, or (redrive policy) it
 *   is made visible at once for SQS to move: the core's `DeadLetterDecision`, as in the RabbitMQ and Kafka
 *   adapters (`error` is the text the copy carries in `x-idempotency-error`);
 * - `leave`: nothing is sent to SQS and the message stays invisible until its visibility timeout lapses:
 *   the store did not answer (`store-unavailable`), the claim was lost to another worker (`lease-lost`), the
 *   dead-letter copy or check failed (`dead-letter-failed`), an unexpected error (`error`), or `stop()` gave
 *   up waiting for it (`abandoned`).
 */
export type Decision =
  | {
      readonly action: 'delete';
      readonly reason: 'completed' | 'duplicate' | 'unprotected' | 'dead-lettered-before';
    }
  | {
      readonly action: 'change-visibility';
      readonly reason: 'conflict' | 'handler-error' | 'fifo-blocked' | 'stopping';
      /** The new visibility timeout, in seconds from now (0 to 43200). */
      readonly visibilityTimeoutSeconds: number;
    }
  | DeadLetterDecision
  | {
      readonly action: 'leave';
      readonly reason: 'store-unavailable' | 'lease-lost' | 'dead-letter-failed' | 'error' | 'abandoned';
    };

/** What {@link decide} needs besides the result. */
export interface DecisionPolicy {
  /** Visibility backoff after a retryable error, from `ApproximateReceiveCount`. */
  readonly retryBackoff: BackoffOptions;
  /** The longest visibility timeout of a CONFLICT, in milliseconds. */
  readonly maxConflictDelayMs: number;
  /** Most receives of an unprotected message whose handler throws (the runner bounds protected ones). */
  readonly maxAttempts: number;
  /** The runner's `isRetryable` (a predicate that throws counts the error as retryable). */
  readonly isRetryable: (error: unknown) => boolean;
  /** Injectable randomness for the backoff jitter. */
  readonly random?: () => number;
}

/**
 * The SQS action of the core's decision for a message received `receiveCount` times
 * (docs/design.md#outcome-to-broker-action, SQS column). A retry after a handler error hides the message
 * for the backoff of its receive count; a CONFLICT for the holder's remaining lease, at least 1 s; a lost
 * claim leaves it to its visibility timeout. Pure, given `policy.random`.
 */
export function toSqsDecision(
  decision: PipelineDecision,
  receiveCount: number,
  policy: DecisionPolicy,
): Decision {
  switch (decision.action) {
    case 'ack':
      return decision.reason === 'lease-lost'
        ? { action: 'leave', reason: 'lease-lost' }
        : { action: 'delete', reason: decision.reason };
    case 'dead-letter':
      return decision;
    case 'retry': {
      if (decision.reason === 'lease-lost') return { action: 'leave', reason: 'lease-lost' };
      const ms =
        decision.reason === 'conflict'
          ? decision.delayMs
          : computeBackoffMs(receiveCount, policy.retryBackoff, policy.random);
      const seconds = toVisibilitySeconds(ms);
      const visibilityTimeoutSeconds = decision.reason === 'conflict' ? Math.max(1, seconds) : seconds;
      return { action: 'change-visibility', reason: decision.reason, visibilityTimeoutSeconds };
    }
    case 'leave':
      if (decision.reason === 'stopping') {
        return { action: 'change-visibility', reason: 'stopping', visibilityTimeoutSeconds: 0 };
      }
      return { action: 'leave', reason: decision.reason };
  }
}

/**
 * The SQS action for one message: a pure function of what happened ({@link MessageResult}) and the
 * policy. Unprotected runs count their attempts by `ApproximateReceiveCount`.
 */
export function decide<T>(input: MessageResult<T>, policy: DecisionPolicy): Decision {
  switch (input.kind) {
    case 'missing-key':
    case 'invalid-key':
      return {
        action: 'dead-letter',
        reason: input.kind,
        attempt: 0,
        error: describeError(input.error),
        failedFencingToken: undefined,
      };
    case 'store-unavailable':
      return { action: 'leave', reason: 'store-unavailable' };
    case 'fifo-blocked':
    case 'stopping':
      return { action: 'change-visibility', reason: input.kind, visibilityTimeoutSeconds: 0 };
    case 'error':
      return { action: 'leave', reason: 'error' };
    case 'abandoned':
      return { action: 'leave', reason: 'abandoned' };
    case 'run':
      return toSqsDecision(coreDecide(input.result, policy, input.receiveCount), input.receiveCount, policy);
  }
}
