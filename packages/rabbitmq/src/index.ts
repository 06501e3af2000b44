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
  type IdempotentConsumerDependencies,
} from './consumer';
export type { AckReason, Decision, RequeueReason, RetryReason } from './decide';
export type {
  BrokerOperation,
  ConsumerState,
  IdempotentConsumerEvents,
  MessageSubject,
  RabbitMqSource,
} from './events';
export type { RabbitMqHandler, RabbitMqHandlerContext } from './handler';
export { DEAD_LETTER_HEADERS, IDEMPOTENCY_KEY_HEADER, RETRY_HEADERS } from './headers';
export type { IdempotencyKeyExtractor } from './idempotency-key';
export { type IdempotentConsumerOptions, RABBITMQ_DEFAULT_ACK_TIMEOUT_MS } from './options';
export type { ConsumerTopology, DelayTier } from './topology';
