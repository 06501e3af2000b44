import type { HandlerContext } from '@idempotent-consumer/core';
import type { ConsumeMessage } from 'amqplib';

/**
 * What a handler receives for one delivery: the core's `HandlerContext` (`scope`, `key`, `fencingToken`,
 * `attempt`, `outcome`, `signal`) plus the delivery itself.
 *
 * A delivery without an idempotency key run under `missingKey: 'process'` has `outcome: 'UNPROTECTED'`,
 * `key: undefined`, `fencingToken: 0`, and `attempt` counted in the `x-idempotency-attempt` header (1 for
 * the first). A delivery run unprotected because the store did not answer (`storeFailureMode: 'open'`)
 * keeps its key. Either `UNPROTECTED` run has a `signal` that aborts when the consumer stops or past
 * `handlerTimeoutMs` (`HandlerTimeoutError`), as a claimed run's does past `handlerTimeoutMs`. The same
 * shape in the Kafka and SQS adapters.
 */
export interface RabbitMqHandlerContext extends Omit<HandlerContext, 'key'> {
  /** The idempotency key; `undefined` only for a delivery without one run under `missingKey: 'process'`. */
  readonly key: string | undefined;
  /** The delivery itself (content, fields, properties). */
  readonly message: ConsumeMessage;
}

/**
 * The operation run for one delivery. Its resolved value is stored as the record's result and replayed to
 * duplicates. Throw `NonRetryableError` (from core) for a failure that must be dead-lettered at once; any
 * other error is retried through a delay tier until `maxAttempts`.
 */
export type RabbitMqHandler<T> = (context: RabbitMqHandlerContext) => Promise<T> | T;
