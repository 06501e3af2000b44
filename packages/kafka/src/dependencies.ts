import type { Idempotency } from '@idempotent-consumer/core';
import type { ConsumerLike, ProducerLike } from './types';

/** What the wrappers use, passed apart from the options. */
export interface KafkaIdempotencyDependencies {
  /** The runner (and its store) records live in. */
  readonly idempotency: Idempotency;
  /** The consumer whose partitions are paused and resumed (KafkaJS `Consumer`). */
  readonly consumer: ConsumerLike;
  /** Sends dead letters; required unless `deadLetterTopic` is `false`. */
  readonly producer?: ProducerLike;
}
