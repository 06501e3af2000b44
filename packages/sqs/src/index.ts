/**
 * `@idempotent-consumer/sqs`: effectively-once SQS consumers (`@aws-sdk/client-sqs` v3) on the
 * idempotency state machine of `@idempotent-consumer/core`, as the wiring of an sqs-consumer `Consumer`
 * ({@link createSqsConsumerWiring}) and as a poller of its own ({@link IdempotentSqsPoller}). See
 * docs/design.md#outcome-to-broker-action, SQS column.
 * @packageDocumentation
 */
export { DEAD_LETTER_ATTRIBUTES } from './dead-letter';
export type { DeadLetterReason, Decision } from './decide';
export { DeadLetterRefusedError, type SqsErrorCode, SqsOperationError } from './errors';
export type { MessageSubject, SqsIdempotencyEvents, SqsMessageSource } from './events';
export type { SqsHandler, SqsHandlerContext } from './handler';
export { IDEMPOTENCY_KEY_ATTRIBUTE } from './message-attributes';
export type { DeadLetterTarget, IdempotencyKeyExtractor, SqsIdempotencyOptions } from './options';
export { IdempotentSqsPoller } from './poller';
export type { SqsPollerOptions } from './poller-options';
export type { SqsClientLike, SqsIdempotencyDependencies } from './sqs-client';
export {
  createSqsConsumerWiring,
  type SqsConsumerWiring,
  type SqsConsumerWiringOptions,
} from './sqs-consumer-wiring';

import type { SqsIdempotencyEvents } from './events';
import type { SqsIdempotencyDependencies } from './sqs-client';

/** @deprecated Renamed {@link SqsIdempotencyEvents}; this name goes in the next minor version. */
export type SqsEvents = SqsIdempotencyEvents;
/** @deprecated Renamed {@link SqsIdempotencyDependencies}; this name goes in the next minor version. */
export type SqsDependencies = SqsIdempotencyDependencies;
