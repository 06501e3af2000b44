import type { Message } from '@aws-sdk/client-sqs';
import type { RunOutcome } from '@idempotent-consumer/core';
import type { AdapterLeaseLostDuring } from '@idempotent-consumer/core/kit';
import type { Decision } from './decide';

/** Where a dead-lettered message went (set with a `dead-letter` decision). */
export interface DeadLetterDelivery {
  /** `copy`: sent to the dead-letter queue, then deleted; `redrive-policy`: made visible for SQS to move. */
  readonly via: 'copy' | 'redrive-policy';
  /** The dead-letter queue: its URL (copy) or the redrive policy's `deadLetterTargetArn`. */
  readonly destination: string;
  /**
   * True on the delivery that dead-letters it for good: the copy was sent, or (redrive policy) its
   * `ApproximateReceiveCount` reached `maxReceiveCount`, so SQS moves it at its next receive. Earlier
   * receives on the redrive path are false, so `deadLettered` is reported once per message.
   */
  readonly final: boolean;
}

/** One processed message: what happened and what the adapter does with it (internal). */
export interface ProcessedMessage<T> {
  readonly message: Message;
  /** The idempotency key, `undefined` when the message had none (or the extractor threw). */
  readonly key: string | undefined;
  /**
   * The claim's outcome (`UNPROTECTED` when the handler ran without idempotency), or `undefined` when no
   * claim was answered (store unavailable, missing or invalid key, FIFO predecessor not finished).
   */
  readonly outcome: RunOutcome | undefined;
  /** The record's attempt count (0 when no claim was made). */
  readonly attempt: number;
  /** Whether the handler ran in this delivery, and how it ended. */
  readonly handler: 'not-run' | 'completed' | 'threw';
  /** The handler's result (`completed`), or the stored result replayed to a `DUPLICATE`. */
  readonly result?: T | undefined;
  /** The handler's error, the dead-letter reason's error, or the store / SQS error. */
  readonly error?: unknown;
  /** The decision carried out (a failed dead-letter copy turns into `leave`/`dead-letter-failed`). */
  readonly decision: Decision;
  /** With a `dead-letter` decision: where it went. */
  readonly deadLetter?: DeadLetterDelivery | undefined;
  /**
   * When the claim was lost: before the start, during the heartbeat (the handler aborted, whether it then
   * returned or threw), or at the write of its outcome (the lease held until then): the kit's
   * `leaseLostDuring`.
   */
  readonly leaseLostDuring?: AdapterLeaseLostDuring | undefined;
  /**
   * True when the store did not answer at some step (claim, or the write after the handler): consumption
   * pauses until it answers again.
   */
  readonly storeUnavailable: boolean;
  /** With `storeUnavailable`: what the store failed with (the `storeUnavailable` event's `error`). */
  readonly storeError?: unknown;
}
