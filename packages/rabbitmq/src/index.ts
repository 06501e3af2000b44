/**
 * `@idempotent-consumer/rabbitmq`: effectively-once RabbitMQ consumers on amqplib (manual acks), with
 * delay-tier queues for CONFLICT and retries and a dead-letter exchange (DESIGN.md, RabbitMQ column).
 * @packageDocumentation
 */
export type { AmqpConnection, ConsumeChannel, PublishChannel } from './amqp-types';
export { ConfirmPublisher } from './confirm-publisher';
export {
  createIdempotentConsumer,
  IdempotentConsumer,
  type IdempotentConsumerDependencies,
} from './consumer';
export {
  type AckReason,
  type BrokerAction,
  type DeadLetterReason,
  type DecisionPolicy,
  decideAction,
  type RetryReason,
} from './decide';
export { pickDelayTier } from './delay-tiers';
export type {
  ConsumerState,
  DeliverySubject,
  IdempotentConsumerEvents,
  RequeueReason,
} from './events';
export type { RabbitHandler, RabbitHandlerContext } from './handler';
export { attemptFromHeaders, HEADERS, IDEMPOTENCY_KEY_HEADER } from './headers';
export { defaultIdempotencyKey, type IdempotencyKeyExtractor } from './idempotency-key';
export {
  type IdempotentConsumerOptions,
  RABBITMQ_DEFAULT_ACK_TIMEOUT_MS,
  type ResolvedConsumerOptions,
  resolveConsumerOptions,
} from './options';
export {
  type ConsumerTopology,
  consumerTopology,
  type DelayTier,
  delayTierArguments,
  ensureTopology,
} from './topology';
