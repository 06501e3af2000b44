/**
 * `@idempotent-consumer/kafka`: effectively-once KafkaJS `eachMessage` / `eachBatch` handlers on the
 * idempotency state machine of `@idempotent-consumer/core` (docs/design.md#outcome-to-broker-action, Kafka column).
 * @packageDocumentation
 */
export { DEAD_LETTER_HEADERS } from './dead-letter';
export type { Decision, RetryReason } from './decide';
export type { KafkaIdempotencyDependencies } from './dependencies';
export { type IdempotentEachBatch, idempotentEachBatch } from './each-batch';
export { type IdempotentEachMessage, idempotentEachMessage } from './each-message';
export { type KafkaErrorCode, PartitionPausedError } from './errors';
export type {
  DeadLetterReason,
  KafkaEventEmitter,
  KafkaIdempotencyEvents,
  KafkaSource,
  LeaseLostReason,
  MessageSubject,
} from './events';
export type { KafkaHandler, KafkaHandlerContext } from './handler';
export { IDEMPOTENCY_KEY_HEADER, type IdempotencyKeyExtractor, type MessageOrigin } from './headers';
export type { FingerprintSource, KafkaIdempotencyOptions } from './options';
export type * from './types';

import type { IdempotencyKeyExtractor } from './headers';

/** @deprecated Renamed {@link IdempotencyKeyExtractor}; this name goes in the next minor version. */
export type KeyExtractor = IdempotencyKeyExtractor;
