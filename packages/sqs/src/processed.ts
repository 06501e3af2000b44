import type { Message } from '@aws-sdk/client-sqs';
import type { RunOutcome } from '@idempotent-consumer/core';
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
  /** The claim's outcome (`UNPROTECTED` without a claim), `undefined` when no claim was answered. */
  readonly outcome: RunOutcome | undefined;
  /** The record's attempt count (0 when no claim was made). */
  readonly attempt: number;
  /** The handler's error, the dead letter's error, or the store / SQS error. */
  readonly error?: unknown;
  /** The decision carried out (a failed dead-letter copy turns into `leave`/`dead-letter-failed`). */
  readonly decision: Decision;
  /** With a `dead-letter` decision: where it went. */
  readonly deadLetter?: DeadLetterDelivery | undefined;
  /** Phantom: the handler's result type. */
  readonly result?: T;
}
