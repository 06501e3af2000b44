import type { Idempotency, IdempotencyLogger } from '@idempotent-consumer/core';

/** What {@link idempotentProcessor} uses, passed apart from the options. */
export interface BullMqIdempotencyDependencies {
  /** The runner, and through it the store, the records live in. Its Redis may be BullMQ's or another. */
  readonly idempotency: Idempotency;
  /**
   * Where what a person must not miss is logged as warnings, never a line per job. That is the first job
   * dead-lettered for a missing or invalid key, the store unavailable and recovered, a lease lost, and a
   * Redis connection error once per outage. Any `{ warn, error }`, or `false` for none.
   * @defaultValue console
   */
  readonly logger?: IdempotencyLogger | false;
}
