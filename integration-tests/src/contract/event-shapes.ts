/**
 * Type-level checks of issue #8's event contract (run by the integration-tests typecheck, `tsc --noEmit`):
 * the same event carries the same shape in the RabbitMQ, Kafka, SQS, BullMQ and NATS adapters. A change that makes one
 * adapter's payload differ fails the typecheck here.
 */
import type * as bullmq from '@idempotent-consumer/bullmq';
import type { DeadLetterDecision, MessageSubjectOf } from '@idempotent-consumer/core/kit';
import type * as kafka from '@idempotent-consumer/kafka';
import type * as nats from '@idempotent-consumer/nats';
import type * as rabbitmq from '@idempotent-consumer/rabbitmq';
import type * as sqs from '@idempotent-consumer/sqs';

/** `true` when `A` and `B` are the same type, else `false`. */
type Same<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false;
/** Compiles only when `T` is `true`. */
type Assert<T extends true> = T;

type First<E, K extends keyof E> = E[K] extends [infer P, ...unknown[]] ? P : never;
type Rmq = rabbitmq.RabbitMqIdempotencyEvents;
type Kafka = kafka.KafkaIdempotencyEvents;
type Sqs = sqs.SqsIdempotencyEvents;
type Bull = bullmq.BullMqIdempotencyEvents;
type Nats = nats.NatsIdempotencyEvents;

/** Every adapter exports its event subject as `MessageSubject`, the kit's subject with its own source. */
export type SubjectNames = [
  Assert<Same<rabbitmq.MessageSubject, MessageSubjectOf<rabbitmq.RabbitMqSource>>>,
  Assert<Same<kafka.MessageSubject, MessageSubjectOf<kafka.KafkaSource>>>,
  Assert<sqs.MessageSubject extends MessageSubjectOf<sqs.SqsMessageSource> ? true : false>,
  Assert<Same<bullmq.MessageSubject, MessageSubjectOf<bullmq.BullMqSource>>>,
  Assert<Same<nats.MessageSubject, MessageSubjectOf<nats.NatsSource>>>,
];

/** `settled` is the subject and the decision, nothing else, in every adapter. */
export type SettledShape = [
  Assert<Same<keyof First<Rmq, 'settled'>, keyof rabbitmq.MessageSubject | 'decision'>>,
  Assert<Same<keyof First<Kafka, 'settled'>, keyof kafka.MessageSubject | 'decision'>>,
  Assert<Same<keyof First<Sqs, 'settled'>, keyof sqs.MessageSubject | 'decision'>>,
  Assert<Same<First<Rmq, 'settled'>['decision'], rabbitmq.Decision>>,
  Assert<Same<First<Sqs, 'settled'>['decision'], sqs.Decision>>,
  Assert<Same<keyof First<Bull, 'settled'>, keyof bullmq.MessageSubject | 'decision'>>,
  Assert<Same<First<Bull, 'settled'>['decision'], bullmq.Decision>>,
  Assert<Same<keyof First<Nats, 'settled'>, keyof nats.MessageSubject | 'decision'>>,
  Assert<Same<First<Nats, 'settled'>['decision'], nats.Decision>>,
];

/** A retry after a handler error has the same `reason` everywhere. */
export type RetryReasons = [
  Assert<'handler-error' extends First<Rmq, 'retryScheduled'>['reason'] ? true : false>,
  Assert<'handler-error' extends First<Kafka, 'retryScheduled'>['reason'] ? true : false>,
  Assert<'handler-error' extends First<Sqs, 'retryScheduled'>['reason'] ? true : false>,
  Assert<'conflict' extends First<Sqs, 'retryScheduled'>['reason'] ? true : false>,
  Assert<'handler-error' extends First<Bull, 'retryScheduled'>['reason'] ? true : false>,
  Assert<'conflict' extends First<Bull, 'retryScheduled'>['reason'] ? true : false>,
  Assert<'handler-error' extends First<Nats, 'retryScheduled'>['reason'] ? true : false>,
  Assert<'conflict' extends First<Nats, 'retryScheduled'>['reason'] ? true : false>,
];

/** `storeError` and `brokerError` name the message they were about as `source`, the adapter's own type. */
export type ErrorSources = [
  Assert<Same<First<Rmq, 'storeError'>['source'], rabbitmq.RabbitMqSource | undefined>>,
  Assert<Same<First<Rmq, 'brokerError'>['source'], rabbitmq.RabbitMqSource | undefined>>,
  Assert<Same<First<Kafka, 'storeError'>['source'], kafka.KafkaSource | undefined>>,
  Assert<Same<First<Kafka, 'brokerError'>['source'], kafka.KafkaSource | undefined>>,
  Assert<Same<First<Sqs, 'storeError'>['source'], sqs.SqsMessageSource | undefined>>,
  Assert<Same<First<Sqs, 'brokerError'>['source'], sqs.SqsMessageSource | undefined>>,
  Assert<Same<First<Bull, 'storeError'>['source'], bullmq.BullMqSource | undefined>>,
  Assert<Same<First<Bull, 'brokerError'>['source'], bullmq.BullMqSource | undefined>>,
  Assert<Same<First<Nats, 'storeError'>['source'], nats.NatsSource | undefined>>,
  Assert<Same<First<Nats, 'brokerError'>['source'], nats.NatsSource | undefined>>,
];

/** `storeUnavailable` carries the store's `error`, `storeRecovered` how long it was down, in every adapter. */
export type StoreEvents = [
  Assert<'error' extends keyof First<Rmq, 'storeUnavailable'> ? true : false>,
  Assert<'error' extends keyof First<Kafka, 'storeUnavailable'> ? true : false>,
  Assert<'error' extends keyof First<Sqs, 'storeUnavailable'> ? true : false>,
  Assert<'error' extends keyof First<Nats, 'storeUnavailable'> ? true : false>,
  Assert<'downMs' extends keyof First<Rmq, 'storeRecovered'> ? true : false>,
  Assert<'downMs' extends keyof First<Kafka, 'storeRecovered'> ? true : false>,
  Assert<'downMs' extends keyof First<Sqs, 'storeRecovered'> ? true : false>,
  Assert<'error' extends keyof First<Bull, 'storeUnavailable'> ? true : false>,
  Assert<'downMs' extends keyof First<Bull, 'storeRecovered'> ? true : false>,
  Assert<'downMs' extends keyof First<Nats, 'storeRecovered'> ? true : false>,
];

/**
 * A dead letter is decided and reported the same way everywhere: the decision is the core's
 * `DeadLetterDecision` (`deadLetterOf`), and `deadLettered.error` is the text the copy carries
 * (`x-idempotency-error`).
 */
export type DeadLetters = [
  Assert<Same<Extract<rabbitmq.Decision, { action: 'dead-letter' }>, DeadLetterDecision>>,
  Assert<Same<Extract<kafka.Decision, { action: 'dead-letter' }>, DeadLetterDecision>>,
  Assert<Same<Extract<sqs.Decision, { action: 'dead-letter' }>, DeadLetterDecision>>,
  Assert<Same<Extract<nats.Decision, { action: 'dead-letter' }>, DeadLetterDecision>>,
  Assert<Same<First<Rmq, 'deadLettered'>['error'], string>>,
  Assert<Same<First<Kafka, 'deadLettered'>['error'], string>>,
  Assert<Same<First<Sqs, 'deadLettered'>['error'], string>>,
  Assert<Same<Extract<bullmq.Decision, { action: 'dead-letter' }>, DeadLetterDecision>>,
  Assert<Same<First<Bull, 'deadLettered'>['error'], string>>,
  Assert<Same<First<Nats, 'deadLettered'>['error'], string>>,
];

/** A retry reports what the handler threw, the same type everywhere (the thrown value, not its text). */
export type RetryErrors = [
  Assert<Same<First<Rmq, 'retryScheduled'>['error'], unknown>>,
  Assert<Same<First<Kafka, 'retryScheduled'>['error'], unknown>>,
  Assert<Same<First<Sqs, 'retryScheduled'>['error'], unknown>>,
  Assert<Same<First<Nats, 'retryScheduled'>['error'], unknown>>,
  Assert<Same<Extract<rabbitmq.Decision, { action: 'retry' }>['error'], unknown>>,
  Assert<Same<Extract<kafka.Decision, { action: 'retry' }>['error'], unknown>>,
  Assert<Same<First<Bull, 'retryScheduled'>['error'], unknown>>,
  Assert<Same<Extract<bullmq.Decision, { action: 'retry' }>['error'], unknown>>,
];
