import type { SQSClient } from '@aws-sdk/client-sqs';
import type { Idempotency } from '@idempotent-consumer/core';

/**
 * The part of an `SQSClient` (`@aws-sdk/client-sqs` v3) the adapter uses: `send`. Pass the client the
 * application already configured (region, credentials, endpoint); the adapter never creates one.
 */
export type SqsClientLike = Pick<SQSClient, 'send'>;

/** The dependencies of every SQS adapter form: the idempotency runner and the SQS client, apart from options. */
export interface SqsDependencies {
  /** The runner whose store holds the records (`@idempotent-consumer/core` `Idempotency`). */
  readonly idempotency: Idempotency;
  /** The SQS client messages are received, deleted and dead-lettered with. */
  readonly sqs: SqsClientLike;
}
