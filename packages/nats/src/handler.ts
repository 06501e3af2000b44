import type { HandlerContext } from '@idempotent-consumer/core';
import type { JsMsg } from '@nats-io/jetstream';

/**
 * What a JetStream handler receives: the core's {@link @idempotent-consumer/core!HandlerContext} (scope,
 * key, fencing token, attempt, outcome, abort signal) and the message. An unprotected run has outcome
 * `UNPROTECTED`, fencing token 0, and `attempt` its delivery count.
 */
export interface NatsHandlerContext extends Omit<HandlerContext, 'key'> {
  /** The idempotency key; `undefined` only for a message without one run under `missingKey: 'process'`. */
  readonly key: string | undefined;
  /** The message as JetStream delivered it. Ack, nak and `working()` are the consumer's, not the handler's. */
  readonly message: JsMsg;
}

/**
 * The operation run for one message. Its resolved value is stored as the record's result. Throw to have
 * it retried (`nak` after a backoff), or throw a `NonRetryableError` to dead-letter it at once.
 */
export type NatsHandler<T> = (context: NatsHandlerContext) => Promise<T> | T;
