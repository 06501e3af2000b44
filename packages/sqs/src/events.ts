import type { Message } from '@aws-sdk/client-sqs';
import type { DeadLetterReason, IdempotencyError } from '@idempotent-consumer/core';
import type { LeaseLostFields, MessageSubjectOf } from '@idempotent-consumer/core/kit';
import type { Decision } from './decide';

/** Which SQS message an event is about. */
export interface SqsMessageSource {
  readonly queueUrl: string;
  readonly messageId: string | undefined;
  /** `ApproximateReceiveCount` (1 when it was not requested). */
  readonly receiveCount: number;
}

/**
 * The subject of every per-message event, the same fields under the same name (`MessageSubject`) in every
 * adapter (`scope`, `key`, `outcome`, `attempt`, the broker's `source`: {@link SqsMessageSource}), plus the
 * received SQS `message`.
 */
export interface MessageSubject extends MessageSubjectOf<SqsMessageSource> {
  /** The message as received. */
  readonly message: Message;
}

/**
 * Events of {@link IdempotentSqsPoller} and of the sqs-consumer wiring (`wiring.events`), by name, with
 * their payloads. The names and subjects are those of the Kafka and RabbitMQ adapters. A listener that
 * throws is ignored; there is deliberately no `error` event.
 */
export interface SqsIdempotencyEvents {
  /**
   * Every message ends in exactly one `settled`, once its decision was carried out (the delete or
   * visibility change sent, or nothing sent for `leave`): the subject and the {@link Decision} taken, the
   * same shape as in the RabbitMQ and Kafka adapters. A message the poller's `stop()` abandoned (still
   * running at `stopTimeoutMs`, or its delete or visibility change unanswered when `stop()` stopped waiting
   * for it) is reported once, with `leave`/`abandoned`, before `stopped`: nothing later is reported for it.
   */
  settled: [MessageSubject & { readonly decision: Decision }];
  /** A CONFLICT or retryable error: the message comes back after `delayMs` (its new visibility timeout). */
  retryScheduled: [
    MessageSubject & {
      readonly reason: 'conflict' | 'handler-error';
      readonly delayMs: number;
      readonly visibilityTimeoutSeconds: number;
      readonly error: unknown;
    },
  ];
  /**
   * A message was dead-lettered, once per message: the copy was sent (`via: 'copy'`, `destination` the
   * dead-letter queue URL), or (`via: 'redrive-policy'`, `destination` its ARN) the receive that reached
   * `maxReceiveCount`, after which SQS moves it.
   */
  deadLettered: [
    MessageSubject & {
      readonly reason: DeadLetterReason;
      /** The error as the copy carries it (`x-idempotency-error`: `Name [CODE]: message`), as in every adapter. */
      readonly error: string;
      readonly via: 'copy' | 'redrive-policy';
      readonly destination: string;
    },
  ];
  /** A message had no idempotency key: dead-lettered (`missingKey: 'dead-letter'`) or run unprotected. */
  missingKey: [MessageSubject & { readonly action: 'dead-letter' | 'process' }];
  /**
   * The key extractor threw on a message (or the store refused the key): it is dead-lettered as
   * `invalid-key`. `error` says why (an `InvalidKeyError`, the extractor's error as its `cause`), the same
   * type as in the RabbitMQ and Kafka adapters.
   */
  invalidKey: [MessageSubject & { readonly error: IdempotencyError }];
  /**
   * The claim was lost (lease expired, another worker claimed, the record vanished); nothing is sent, the
   * new holder finishes. `during`: `start` (before the handler started, nothing ran), `heartbeat` (while it
   * ran: an extension refused, or none reached the store for a whole lease; whether it then returned or
   * threw) or `write` (the lease held while it ran, and the write of its outcome, `complete`, `release`
   * or `fail`, was refused), as in the RabbitMQ and Kafka adapters (the kit's `leaseLostDuring`).
   */
  leaseLost: [MessageSubject & LeaseLostFields];
  /** The store did not answer: receiving pauses (nothing is deleted) until a ping succeeds. */
  storeUnavailable: [{ readonly queueUrl: string; readonly error: unknown }];
  /** The store answers again and receiving resumes; `downMs`: how long it was paused. */
  storeRecovered: [{ readonly queueUrl: string; readonly downMs: number }];
  /** A store call the adapter absorbed failed (`markDeadLettered` after a dead-letter copy was sent). */
  storeError: [
    {
      readonly queueUrl: string;
      readonly operation: string;
      readonly error: unknown;
      /** The message it was about, `undefined` when about none. */
      readonly source: SqsMessageSource | undefined;
    },
  ];
  /**
   * An SQS request failed (`ReceiveMessage`, `DeleteMessageBatch`, `ChangeMessageVisibility[Batch]`,
   * the dead-letter check or copy), or one entry of a batch request; or an unexpected error (`process`).
   */
  brokerError: [
    {
      readonly queueUrl: string;
      readonly operation: string;
      readonly error: unknown;
      /** The message it was about, `undefined` when about none (a `ReceiveMessage`). */
      readonly source: SqsMessageSource | undefined;
    },
  ];
  /** The poller received messages (poller only). */
  received: [{ readonly queueUrl: string; readonly messages: readonly Message[] }];
  /** The poller started receiving (poller only). */
  started: [{ readonly queueUrl: string }];
  /**
   * `stop()` finished (poller only): `abandoned` messages were still running at `stopTimeoutMs`, or their
   * delete or visibility change was unanswered when `stop()` stopped waiting for it; they are left to their
   * visibility timeout (each was reported `settled` with `leave`/`abandoned`).
   */
  stopped: [{ readonly queueUrl: string; readonly abandoned: number }];
}
