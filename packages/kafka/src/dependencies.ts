import type { Idempotency, IdempotencyLogger } from '@idempotent-consumer/core';
import type { ConsumerLike, ProducerLike } from './types';

/** What the wrappers use, passed apart from the options. */
export interface KafkaIdempotencyDependencies {
  /** The runner (and its store) records live in. */
  readonly idempotency: Idempotency;
  /** The consumer whose partitions are paused and resumed (KafkaJS `Consumer`). */
  readonly consumer: ConsumerLike;
  /** Sends dead letters; required unless `deadLetterTopic` is `false`. */
  readonly producer?: ProducerLike;
  /**
   * Where what a person must not miss is logged as warnings, never a line per successful message: the
   * first message dead-lettered (or run unprotected) for a missing key, the first with an invalid key, the
   * store unavailable and recovered (once per outage), a lease lost, a result omitted (the runner's
   * warnings, when the runner does not log to this same logger already), a Redis connection error (once
   * per outage). Any `{ warn, error }` (console, pino, winston); `false` for none. The same option as the
   * RabbitMQ and SQS adapters'. @defaultValue console
   */
  readonly logger?: IdempotencyLogger | false;
}
