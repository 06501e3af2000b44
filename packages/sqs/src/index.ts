/**
 * `@idempotent-consumer/sqs`: effectively-once SQS consumers (`@aws-sdk/client-sqs` v3) on the
 * idempotency state machine of `@idempotent-consumer/core`, as sqs-consumer handler wrappers
 * ({@link idempotentHandleMessage}, {@link idempotentHandleMessageBatch}) and as a poller of its own
 * ({@link IdempotentSqsPoller}). See DESIGN.md, "Outcome → broker action", SQS column.
 * @packageDocumentation
 */
export {
  type IdempotentHandleMessage,
  type IdempotentHandleMessageBatch,
  idempotentHandleMessage,
  idempotentHandleMessageBatch,
  SQS_CONSUMER_ATTRIBUTES,
  type SqsConsumerWrapperOptions,
  type StoreAwareHandler,
} from './consumer-handlers';
export { DEAD_LETTER_ATTRIBUTES, type DeadLetterDetails, sendToDeadLetterQueue } from './dead-letter';
export type { DeadLetterReason, MessageDisposition, ProcessedMessage } from './disposition';
export { SqsOperationError } from './errors';
export {
  defaultIdempotencyKey,
  IDEMPOTENCY_KEY_ATTRIBUTE,
  MAX_VISIBILITY_TIMEOUT_SECONDS,
  messageGroupId,
  queueNameFromUrl,
  receiveCount,
  toVisibilitySeconds,
} from './message-attributes';
export type {
  DeadLetterTarget,
  ResolvedSqsIdempotencyOptions,
  SqsIdempotencyOptions,
  SqsMessageHandler,
} from './options';
export { IdempotentSqsPoller } from './poller';
export type { SqsPollerEvents } from './poller-events';
export type { SqsPollerOptions } from './poller-options';
export type { SqsClientLike, SqsDependencies } from './sqs-client';
