import type { SQSClient } from '@aws-sdk/client-sqs';
import type { Idempotency, IdempotencyLogger } from '@idempotent-consumer/core';

/**
 * The part of an `SQSClient` (`@aws-sdk/client-sqs` v3) the adapter uses: `send`. Pass the client the
 * application already configured (region, credentials, endpoint); the adapter never creates one.
 */
export type SqsClientLike = Pick<SQSClient, 'send'>;

/**
 * The options of an `SqsClientLike.send` that `signal` aborts (an SQS endpoint that never answers would
 * otherwise hold the request, and its socket, until the SDK's socket timeout); none without a signal.
 */
export function abortableBy(signal: AbortSignal | undefined): { abortSignal?: AbortSignal } {
  return signal ? { abortSignal: signal } : {};
}

/** The dependencies of every SQS adapter form: the idempotency runner and the SQS client, apart from options. */
export interface SqsIdempotencyDependencies {
  /** The runner whose store holds the records (`@idempotent-consumer/core` `Idempotency`). */
  readonly idempotency: Idempotency;
  /** The SQS client messages are received, deleted and dead-lettered with. */
  readonly sqs: SqsClientLike;
  /**
   * Where what a person must not miss is logged as warnings, never a line per successful message: the
   * first message dead-lettered (or run unprotected) for a missing key, the first with an invalid key, the
   * store unavailable and recovered (once per outage), a lease lost, a result omitted (the runner's
   * warnings, when the runner does not log to this same logger already), a Redis connection error (once
   * per outage). Any `{ warn, error }` (console, pino, winston); `false` for none. The same option as the
   * RabbitMQ and Kafka adapters'. @defaultValue console
   */
  readonly logger?: IdempotencyLogger | false;
}
