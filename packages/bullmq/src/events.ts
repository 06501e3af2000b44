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
 * The subject of every per-job event, the same fields under the same name in every adapter: `scope`,
 * `key`, `outcome`, `attempt`, and the job's `source` ({@link BullMqSource}).
 */
export type MessageSubject = MessageSubjectOf<BullMqSource>;

/**
 * Events of an {@link IdempotentProcessor}, by name, with their payloads: the same names for the same
 * happenings as in the other adapters. A listener that throws is isolated: it never changes what BullMQ
 * sees. Outcomes themselves are events of the `Idempotency` runner.
 */
export interface BullMqIdempotencyEvents {
  /** The processor ended a job with this decision: returned, threw, or moved it to delayed. Once per run. */
  settled: [MessageSubject & { decision: Decision }];
  /**
   * The job runs again later: moved to delayed for `delayMs` (a CONFLICT), or its handler's error was
   * rethrown with attempts left, and BullMQ's `backoff` decides when (`delayMs` `undefined`).
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
  /** The key extractor or the fingerprint threw, or the store refused the key: an `invalid-key` dead letter. */
  invalidKey: [MessageSubject & { error: IdempotencyError }];
  /** The claim lost its lease (docs/design.md#leases): see `handlerCompleted` for what the handler did. */
  leaseLost: [MessageSubject & LeaseLostFields];
  /** The store did not answer: attached workers pause, and jobs go back to delayed, until a probe answers. */
  storeUnavailable: [{ queue: string | undefined; error: unknown }];
  /** The store answered a probe again and the workers paused for it resumed after `downMs`. */
  storeRecovered: [{ downMs: number }];
  /** A store call the processor absorbed failed (a give-back, a late completion, a dead-letter mark). */
  storeError: [
    { queue: string | undefined; operation: string; error: unknown; source: BullMqSource | undefined },
  ];
  /** A BullMQ call failed: `moveToDelayed` (the job's lock was lost), `pause`, `resume`. */
  brokerError: [
    { queue: string | undefined; operation: string; error: unknown; source: BullMqSource | undefined },
  ];
}

/** The processor's typed emitter: a listener that throws is isolated, and there is no `error` event. */
export class BullMqEventEmitter extends TypedEventEmitter<BullMqIdempotencyEvents> {}
