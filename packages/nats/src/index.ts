/**
 * `@idempotent-consumer/nats`: effectively-once NATS JetStream pull consumers (`@nats-io/jetstream`) on
 * the idempotency state machine of `@idempotent-consumer/core`. See
 * docs/design.md#outcome-to-broker-action, NATS column.
 * @packageDocumentation
 */
export { type NatsIdempotencyDependencies, NatsIdempotentConsumer } from './consumer';
export { DEAD_LETTER_HEADERS } from './dead-letter';
export type { AckReason, Decision, LeaveReason, NakReason, RetryReason } from './decide';
export type { MessageSubject, NatsIdempotencyEvents, NatsSource } from './events';
export type { NatsHandler, NatsHandlerContext } from './handler';
export { type IdempotencyKeyExtractor, MSG_ID_HEADER, type NatsIdempotencyOptions } from './options';
