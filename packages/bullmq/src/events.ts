import type { DeadLetterReason, IdempotencyError } from '@idempotent-consumer/core';
import {
  type LeaseLostFields,
  type MessageSubjectOf,
  TypedEventEmitter,
} from '@idempotent-consumer/core/kit';
import type { Decision } from './decide';

/** Where a job came from. */
export interface BullMqSource {
  /** The queue's name. */
  readonly queue: string;
  /** The job's id. */
  readonly jobId: string;
  /** How many runs of the job failed before this one (BullMQ's `attemptsMade`). */
  readonly attemptsMade: number;
}

/**
 * The subject of every per-job event, with the same fields under the same name as in every adapter, the
 * record's `scope` and `key`, the claim's `outcome` and `attempt`, and the job's `source`.
 */
export type MessageSubject = MessageSubjectOf<BullMqSource>;

/**
 * Events of an {@link IdempotentProcessor}, by name, with their payloads, and the same names for the same
 * happenings as in the other adapters. A listener that throws is isolated and never changes what BullMQ
 * sees. Outcomes themselves are events of the `Idempotency` runner.
 */
export interface BullMqIdempotencyEvents {
  /** The processor ended a run of a job with this decision, once per run. */
  settled: [MessageSubject & { decision: Decision }];
  /**
   * The job runs again later. A CONFLICT moves it to delayed for `delayMs`. A handler error rethrown with
   * attempts left leaves the delay to BullMQ's `backoff`, and `delayMs` is `undefined`.
   */
  retryScheduled: [
    MessageSubject & {
      reason: 'conflict' | 'handler-error' | 'lease-lost';
      delayMs: number | undefined;
      error: unknown;
    },
  ];
  /** The job failed with an `UnrecoverableError` carrying the dead-letter fields in its `failedReason`. */
  deadLettered: [MessageSubject & { reason: DeadLetterReason; error: string }];
  /** The key extractor found no key; `action` is what `missingKey` did with the job. */
  missingKey: [MessageSubject & { action: 'dead-letter' | 'process' }];
  /** The key extractor or the fingerprint threw, or the store refused the key. The job fails as `invalid-key`. */
  invalidKey: [MessageSubject & { error: IdempotencyError }];
  /** The claim lost its lease, as docs/design.md#leases says. `handlerCompleted` tells what the handler did. */
  leaseLost: [MessageSubject & LeaseLostFields];
  /** The store did not answer. Attached workers pause and jobs go back to delayed until a probe answers. */
  storeUnavailable: [{ queue: string | undefined; error: unknown }];
  /** The store answered a probe again and the workers paused for it resumed after `downMs`. */
  storeRecovered: [{ downMs: number }];
  /** A store call the processor absorbed failed, such as a give-back, a late completion or a dead-letter mark. */
  storeError: [
    { queue: string | undefined; operation: string; error: unknown; source: BullMqSource | undefined },
  ];
  /** A BullMQ call failed, `moveToDelayed` when the job's lock was lost, or `pause` or `resume`. */
  brokerError: [
    { queue: string | undefined; operation: string; error: unknown; source: BullMqSource | undefined },
  ];
}

/** The processor's typed emitter. A listener that throws is isolated, and there is no `error` event. */
export class BullMqEventEmitter extends TypedEventEmitter<BullMqIdempotencyEvents> {}
