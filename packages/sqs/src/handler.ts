import type { Message } from '@aws-sdk/client-sqs';
import type { HandlerContext } from '@idempotent-consumer/core';

/**
 * What an SQS handler receives: the core's {@link @idempotent-consumer/core!HandlerContext} (scope, key,
 * fencing token, attempt, outcome, abort signal) plus the SQS message and the URL of its queue. An
 * unprotected run (`missingKey: 'process'`, or `storeFailureMode: 'open'` with the store down) has outcome
 * `UNPROTECTED` and fencing token 0; a message without a key has `key` `undefined` and `attempt` its
 * `ApproximateReceiveCount` (the same shape as the RabbitMQ and Kafka adapters').
 */
export interface SqsHandlerContext extends Omit<HandlerContext, 'key'> {
  /** The idempotency key; `undefined` only for a message without one run under `missingKey: 'process'`. */
  readonly key: string | undefined;
  /** The message as `ReceiveMessage` returned it (body, attributes, receipt handle). */
  readonly message: Message;
  /** The URL of the queue the message came from. */
  readonly queueUrl: string;
}

/**
 * The operation run for one SQS message. Its resolved value is stored as the record's result (replayed to
 * duplicates). Throw to have it retried (after a visibility backoff), or throw a `NonRetryableError` to
 * dead-letter the message at once.
 */
export type SqsHandler<T> = (context: SqsHandlerContext) => Promise<T> | T;
