/**
 * `@idempotent-consumer/rabbitmq`: effectively-once RabbitMQ consumers on amqplib (manual acks), with
 * delay-tier queues for CONFLICT and retries and a dead-letter exchange (docs/design.md#outcome-to-broker-action, RabbitMQ column).
 * @packageDocumentation
 */
export type { AmqpConnection, ConsumeChannel, PublishChannel } from './amqp-types';
export type { CloseReason } from './close-reason';
export {
  createIdempotentConsumer,
  type IdempotentConsumer,
  type RabbitMqIdempotencyDependencies,
} from './consumer';
export type { AckReason, Decision, RequeueReason, RetryReason } from './decide';
export type {
  BrokerOperation,
  ConsumerState,
  MessageSubject,
  RabbitMqIdempotencyEvents,
  RabbitMqSource,
} from './events';
export type { RabbitMqHandler, RabbitMqHandlerContext } from './handler';
export { DEAD_LETTER_HEADERS, IDEMPOTENCY_KEY_HEADER, RETRY_HEADERS } from './headers';
export type { IdempotencyKeyExtractor } from './idempotency-key';
export { RABBITMQ_DEFAULT_ACK_TIMEOUT_MS, type RabbitMqIdempotencyOptions } from './options';
export type { ConsumerTopology, DelayTier } from './topology';

import type { RabbitMqIdempotencyDependencies } from './consumer';
import type { RabbitMqIdempotencyEvents } from './events';
import type { RabbitMqIdempotencyOptions } from './options';

/** @deprecated Renamed {@link RabbitMqIdempotencyOptions}; this name goes in the next minor version. */
export type IdempotentConsumerOptions = RabbitMqIdempotencyOptions;
/** @deprecated Renamed {@link RabbitMqIdempotencyEvents}; this name goes in the next minor version. */
export type IdempotentConsumerEvents = RabbitMqIdempotencyEvents;
/** @deprecated Renamed {@link RabbitMqIdempotencyDependencies}; this name goes in the next minor version. */
export type IdempotentConsumerDependencies = RabbitMqIdempotencyDependencies;
