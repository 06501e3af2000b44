import type { HandlerContext } from '@idempotent-consumer/core';
import type { KafkaMessageLike } from './types';

/** What a Kafka handler receives: the core `HandlerContext` plus the message and where it came from. */
export interface KafkaHandlerContext extends Omit<HandlerContext, 'key'> {
  /**
   * The idempotency key; `undefined` only when `missingKey: 'process'` runs a message without one
   * (`outcome: 'UNPROTECTED'`).
   */
  readonly key: string | undefined;
  readonly topic: string;
  readonly partition: number;
  readonly message: KafkaMessageLike;
  /**
   * The consumer's group heartbeat, for handlers that loop over long work. The wrapper already calls it
   * together with every lease extension.
   */
  heartbeat(): Promise<void>;
}

/**
 * The user's operation for one message. Its resolved value is stored with the COMPLETED record and
 * replayed to duplicates (see the runner's `maxResultBytes`). Throw a `NonRetryableError` to dead-letter
 * the message at once; any other error is retried with backoff up to `maxAttempts`.
 *
 * `outcome: 'UNPROTECTED'` (fencing token and attempt from no record; `attempt` counts this process's runs
 * of the message): no claim is held, because the message has no key (`missingKey: 'process'`) or the store
 * did not answer under the runner's `storeFailureMode: 'open'`.
 */
export type KafkaHandler<T> = (context: KafkaHandlerContext) => Promise<T> | T;
