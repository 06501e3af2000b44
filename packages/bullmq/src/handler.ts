import type { HandlerContext } from '@idempotent-consumer/core';
import type { Job } from 'bullmq';

/**
 * What a handler receives for one job, the core's `HandlerContext` with `scope`, `key`, `fencingToken`,
 * `attempt`, `outcome` and `signal`, plus the job and its lock token. A job without a key run under
 * `missingKey: 'process'` has `outcome` `UNPROTECTED`, no `key` and a `fencingToken` of 0.
 * @typeParam D - the job's data.
 */
export interface BullMqHandlerContext<D = unknown> extends Omit<HandlerContext, 'key'> {
  /** The idempotency key; `undefined` only for a job without one run under `missingKey: 'process'`. */
  readonly key: string | undefined;
  /** The job BullMQ handed to the processor. */
  readonly job: Job<D>;
  /** The job's lock token, as BullMQ passes it to a processor. */
  readonly token: string | undefined;
}

/**
 * The operation run for one job. Its resolved value is stored with the COMPLETED record, is the job's
 * return value, and is replayed as the return value of duplicates. Throw `NonRetryableError` (from core)
 * to fail the job at once; any other error is rethrown to BullMQ, whose `attempts` and `backoff` retry it.
 */
export type BullMqHandler<T, D = unknown> = (context: BullMqHandlerContext<D>) => Promise<T> | T;
