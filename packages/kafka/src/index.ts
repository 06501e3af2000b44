/**
 * `@idempotent-consumer/kafka`: effectively-once KafkaJS `eachMessage` / `eachBatch` handlers on the
 * idempotency state machine of `@idempotent-consumer/core` (DESIGN.md, Kafka column).
 * @packageDocumentation
 */
export { buildDeadLetter, DEAD_LETTER_HEADERS, type DeadLetterInfo } from './dead-letter';
export type { KafkaIdempotencyDependencies } from './dependencies';
export { type IdempotentEachBatch, idempotentEachBatch } from './each-batch';
export { type IdempotentEachMessage, idempotentEachMessage } from './each-message';
export { isFatalToConsumer, PartitionPausedError } from './errors';
export type { DeadLetterReason, KafkaIdempotencyEvent, PauseReason } from './events';
export type { KafkaHandler, KafkaHandlerContext } from './handler';
export {
  defaultKeyExtractor,
  headerText,
  IDEMPOTENCY_KEY_HEADER,
  type KeyExtractor,
  type MessageOrigin,
} from './headers';
export type { KafkaIdempotencyOptions } from './options';
export type * from './types';
