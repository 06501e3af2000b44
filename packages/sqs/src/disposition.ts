import type { Message } from '@aws-sdk/client-sqs';
import type { DeadLetterReason, RunOutcome } from '@idempotent-consumer/core';

/**
 * What the adapter does with one message after its claim and handler (DESIGN.md, "Outcome → broker
 * action", SQS column):
 * - `delete`: the handler completed (`completed`), the key already completed (`duplicate`), the message
 *   was copied to the dead-letter queue (`dead-lettered`), or it ran without protection (`unprotected`);
 * - `change-visibility`: it comes back after `visibilityTimeoutSeconds`: another worker holds the lease
 *   (`conflict`), the handler threw a retryable error (`retry`), it is left to the queue's redrive policy
 *   (`dead-letter-redrive`), or an earlier message of its FIFO group did not finish (`fifo-blocked`);
 * - `leave`: nothing is sent to SQS and the message stays invisible until its visibility timeout lapses:
 *   the store did not answer (`store-unavailable`), the claim was lost to another worker (`lease-lost`),
 *   the copy to the dead-letter queue failed (`dead-letter-failed`), or an unexpected error (`error`).
 */
export type MessageDisposition =
  | {
      readonly action: 'delete';
      readonly reason: 'completed' | 'duplicate' | 'dead-lettered' | 'unprotected';
    }
  | {
      readonly action: 'change-visibility';
      readonly reason: 'conflict' | 'retry' | 'dead-letter-redrive' | 'fifo-blocked';
      /** The new visibility timeout, in seconds from now. */
      readonly visibilityTimeoutSeconds: number;
    }
  | {
      readonly action: 'leave';
      readonly reason: 'store-unavailable' | 'lease-lost' | 'dead-letter-failed' | 'error';
    };

/**
 * Why a message was dead-lettered (attribute `x-idempotency-dead-letter-reason`): the core's vocabulary,
 * shared by every adapter, re-exported so `@idempotent-consumer/sqs` imports keep working.
 */
export type { DeadLetterReason };

/** One processed message: what happened and what the adapter does with it. */
export interface ProcessedMessage<T> {
  readonly message: Message;
  /** The idempotency key, `undefined` when the message had none. */
  readonly key: string | undefined;
  /**
   * The claim's outcome (`UNPROTECTED` when the handler ran without idempotency), or `undefined` when no
   * claim was answered (store unavailable, invalid key, FIFO predecessor not finished).
   */
  readonly outcome: RunOutcome | undefined;
  /** Whether the handler ran in this delivery, and how it ended. */
  readonly handler: 'not-run' | 'completed' | 'threw';
  /** The handler's result (`completed`), or the stored result replayed to a `DUPLICATE`. */
  readonly result?: T | undefined;
  /** The handler's error, the dead-letter reason's error, or the store / SQS error. */
  readonly error?: unknown;
  /** Set when the message was dead-lettered (or left to the redrive policy). */
  readonly deadLetterReason?: DeadLetterReason | undefined;
  /**
   * True when the store did not answer at some step (claim, or the write after the handler): the
   * adapters pause polling until it answers again.
   */
  readonly storeUnavailable: boolean;
  readonly disposition: MessageDisposition;
}
