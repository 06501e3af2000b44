import type { Message } from '@aws-sdk/client-sqs';
import { IdempotencyError, InvalidKeyError } from '@idempotent-consumer/core';
import type { TypedEventEmitter } from '@idempotent-consumer/core/kit';
import type { MessageSubject, SqsEvents, SqsMessageSource } from './events';
import { receiveCount } from './message-attributes';
import type { ProcessedMessage } from './processed';

/** The error of an `invalid-key` dead letter as an `IdempotencyError` (already one, in practice). */
function asInvalidKey(error: unknown): IdempotencyError {
  return error instanceof IdempotencyError
    ? error
    : new InvalidKeyError(`The idempotency key was refused: ${String(error)}`, { cause: error });
}

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
  events: TypedEventEmitter<SqsEvents>,
  queueUrl: string,
  scope: string,
  processed: ProcessedMessage<T>,
): void {
  const { message, decision } = processed;
  if (!hasAnyListener(events)) return; // nothing to build on the hot path
  // Only the subject's fields: the processed message also holds the handler's result and the processor's
  // bookkeeping, which no event of the Kafka or RabbitMQ adapter carries.
  const { key, outcome, attempt } = processed;
  const subject = subjectOf(queueUrl, scope, message, { key, outcome, attempt });
  if (processed.key === undefined && processed.outcome === 'UNPROTECTED') {
    events.emit('missingKey', { ...subject, action: 'process' });
  } else if (decision.action === 'dead-letter' || decision.reason === 'dead-letter-failed') {
    const reason = decision.action === 'dead-letter' ? decision.reason : undefined;
    if (reason === 'missing-key') events.emit('missingKey', { ...subject, action: 'dead-letter' });
    if (reason === 'invalid-key')
      events.emit('invalidKey', { ...subject, error: asInvalidKey(processed.error) });
  }
  if (processed.leaseLostDuring) {
    events.emit('leaseLost', {
      ...subject,
      during: processed.leaseLostDuring,
      handlerCompleted: processed.handler === 'completed',
    });
  }
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

const PER_MESSAGE_EVENTS = [
  'settled',
  'retryScheduled',
  'deadLettered',
  'missingKey',
  'invalidKey',
  'leaseLost',
] as const;

function hasAnyListener(events: TypedEventEmitter<SqsEvents>): boolean {
  return PER_MESSAGE_EVENTS.some((name) => events.hasListeners(name));
}
