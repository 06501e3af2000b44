import type { Message } from '@aws-sdk/client-sqs';
import type { DeadLetterReason, RunOutcome } from '@idempotent-consumer/core';
import type { Decision } from './decide';

/** Which SQS message an event is about. */
export interface SqsMessageSource {
  readonly queueUrl: string;
  readonly messageId: string | undefined;
  /** `ApproximateReceiveCount` (1 when it was not requested). */
  readonly receiveCount: number;
}

/** What every per-message event carries: the same subject as the Kafka and RabbitMQ adapters. */
export interface SqsEventSubject {
  readonly scope: string;
  /** The idempotency key, `undefined` when the message had none (or the extractor threw). */
  readonly key: string | undefined;
  /** The claim's outcome, `UNPROTECTED` for an unprotected run, `undefined` when no claim was answered. */
  readonly outcome: RunOutcome | undefined;
  /** The record's attempt count (0 when no claim was made). */
  readonly attempt: number;
  readonly source: SqsMessageSource;
  readonly message: Message;
}

/**
 * Events of {@link IdempotentSqsPoller} and of the sqs-consumer wiring (`wiring.events`), by name, with
 * their payloads. The names and subjects are those of the Kafka and RabbitMQ adapters. A listener that
 * throws is ignored; there is deliberately no `error` event.
 */
export interface SqsEvents<T = unknown> {
  /**
   * Every message ends in exactly one `settled`, once its decision was carried out (the delete or
   * visibility change sent, or nothing sent for `leave`): `action`/`reason` are the {@link Decision}'s.
   */
  settled: [
    SqsEventSubject & {
      readonly action: Decision['action'];
      readonly reason: Decision['reason'];
      readonly decision: Decision;
      readonly handler: 'not-run' | 'completed' | 'threw';
      /** The handler's result, or the result replayed to a DUPLICATE. */
      readonly result: T | undefined;
      readonly error: unknown;
    },
  ];
  /** A CONFLICT or retryable error: the message comes back after `delayMs` (its new visibility timeout). */
  retryScheduled: [
    SqsEventSubject & {
      readonly reason: 'conflict' | 'retry';
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
    SqsEventSubject & {
      readonly reason: DeadLetterReason;
      readonly error: unknown;
      readonly via: 'copy' | 'redrive-policy';
      readonly destination: string;
    },
  ];
  /** A message had no idempotency key: dead-lettered (`missingKey: 'dead-letter'`) or run unprotected. */
  missingKey: [SqsEventSubject & { readonly action: 'dead-letter' | 'process' }];
  /** The key extractor threw on a message (or the key was refused): it is dead-lettered as `invalid-key`. */
  invalidKey: [SqsEventSubject & { readonly error: unknown }];
  /** The claim was lost (lease expired, another worker claimed); nothing is sent, the new holder finishes. */
  leaseLost: [
    SqsEventSubject & {
      readonly during: 'start' | 'heartbeat' | 'write';
      readonly handlerCompleted: boolean;
    },
  ];
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
      readonly message?: Message;
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
      readonly message?: Message;
    },
  ];
  /** The poller received messages (poller only). */
  received: [{ readonly queueUrl: string; readonly messages: readonly Message[] }];
  /** The poller started receiving (poller only). */
  started: [{ readonly queueUrl: string }];
  /**
   * `stop()` finished (poller only): `abandoned` messages were still running at `stopTimeoutMs` and are
   * left to their visibility timeout.
   */
  stopped: [{ readonly queueUrl: string; readonly abandoned: number }];
}
