import type { Message } from '@aws-sdk/client-sqs';
import type { ProcessedMessage } from './disposition';

/**
 * Events of an {@link IdempotentSqsPoller}. Listeners are isolated: one that throws changes nothing.
 * There is deliberately no `error` event (an unhandled `error` event would crash the process): SQS errors
 * arrive as `sqsError`.
 */
export interface SqsPollerEvents<T> {
  /** A `ReceiveMessage` returned messages. */
  received: [messages: Message[]];
  /** A message was processed: its outcome, whether the handler ran, and its disposition. */
  processed: [processed: ProcessedMessage<T>];
  /** A message was deleted (`reason`: completed, duplicate, dead-lettered, unprotected). */
  deleted: [processed: ProcessedMessage<T>];
  /** A message's visibility timeout was set (conflict, retry, dead-letter-redrive, fifo-blocked). */
  visibilityChanged: [processed: ProcessedMessage<T>];
  /** A message was sent to the dead-letter queue, or left to the redrive policy, with its reason. */
  deadLettered: [processed: ProcessedMessage<T>];
  /** The store stopped answering: polling is paused and nothing is deleted until it answers. */
  storeUnavailable: [info: { error: unknown }];
  /** The store answers again; polling resumes. `downMs`: how long the probes took. */
  storeRecovered: [info: { downMs: number }];
  /** An SQS request failed (receive, batch delete, visibility change, or one of their entries). */
  sqsError: [info: { operation: string; error: unknown; message?: Message | undefined }];
  /** `stop()` finished: no receive in flight, every in-flight message settled, every batch sent. */
  stopped: [];
}
