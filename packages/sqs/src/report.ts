import type { Message } from '@aws-sdk/client-sqs';
import type { TypedEventEmitter } from '@idempotent-consumer/core/kit';
import type { MessageSubject, SqsIdempotencyEvents, SqsMessageSource } from './events';
import { receiveCount } from './message-attributes';
import type { ProcessedMessage } from './processed';

/** Where a message came from: the `source` of its events. */
export function sourceOf(queueUrl: string, message: Message): SqsMessageSource {
  return { queueUrl, messageId: message.MessageId, receiveCount: receiveCount(message) };
}

/** The event subject of a message. */
export function subjectOf(
  queueUrl: string,
  scope: string,
  message: Message,
  fields: { key: string | undefined; outcome: MessageSubject['outcome']; attempt: number },
): MessageSubject {
  return {
    scope,
    ...fields,
    source: sourceOf(queueUrl, message),
    message,
  };
}

/**
 * Emits the events of one processed message once its decision was carried out: `missingKey` /
 * `invalidKey` / `leaseLost` / `retryScheduled` / `deadLettered` as they apply, then `settled`.
 */
export function reportProcessed<T>(
  events: TypedEventEmitter<SqsIdempotencyEvents>,
  queueUrl: string,
  scope: string,
  processed: ProcessedMessage<T>,
): void {
  const { message, decision } = processed;
  if (!hasAnyListener(events)) return; // nothing to build on the hot path
  const { key, outcome, attempt } = processed;
  const subject = subjectOf(queueUrl, scope, message, { key, outcome, attempt });
  if (
    decision.action === 'change-visibility' &&
    decision.reason !== 'fifo-blocked' &&
    decision.reason !== 'stopping'
  ) {
    events.emit('retryScheduled', {
      ...subject,
      reason: decision.reason,
      delayMs: decision.visibilityTimeoutSeconds * 1000,
      visibilityTimeoutSeconds: decision.visibilityTimeoutSeconds,
      error: processed.error,
    });
  }
  if (decision.action === 'dead-letter' && processed.deadLetter?.final) {
    events.emit('deadLettered', {
      ...subject,
      reason: decision.reason,
      error: decision.error,
      via: processed.deadLetter.via,
      destination: processed.deadLetter.destination,
    });
  }
  events.emit('settled', { ...subject, decision });
}

/**
 * The SQS request that carries out a decision: `delete` (completed, duplicate, unprotected, a dead-letter
 * copy sent), a visibility timeout in seconds (retry, conflict, FIFO-blocked, redrive policy: 0), or
 * nothing (`leave`).
 */
export function sqsRequestOf<T>(processed: ProcessedMessage<T>): 'delete' | number | undefined {
  const d = processed.decision;
  switch (d.action) {
    case 'delete':
      return 'delete';
    case 'change-visibility':
      return d.visibilityTimeoutSeconds;
    case 'dead-letter':
      return processed.deadLetter?.via === 'redrive-policy' ? 0 : 'delete';
    case 'leave':
      return undefined;
  }
}

const PER_MESSAGE_EVENTS = ['settled', 'retryScheduled', 'deadLettered'] as const;

function hasAnyListener(events: TypedEventEmitter<SqsIdempotencyEvents>): boolean {
  return PER_MESSAGE_EVENTS.some((name) => events.hasListeners(name));
}
