import type { Message, MessageSystemAttributeName } from '@aws-sdk/client-sqs';

/** The message attribute the default key extractor reads (docs/design.md#key-sources). */
export const IDEMPOTENCY_KEY_ATTRIBUTE = 'idempotency-key';

/**
 * The message attributes a receive asks for: all of them. The `idempotency-key` attribute is read from
 * them, a dead-letter copy keeps them, and telemetry reads its trace context from them.
 */
export const RECEIVED_MESSAGE_ATTRIBUTES: readonly string[] = ['All'];

/**
 * The system attributes a receive asks for, and no others (each one is parsed on every message):
 * `ApproximateReceiveCount` ({@link receiveCount}: retry backoff, `maxAttempts`, the redrive check) and
 * `MessageGroupId` ({@link messageGroupId}: FIFO order, a FIFO dead-letter copy).
 */
export const RECEIVED_SYSTEM_ATTRIBUTES: readonly MessageSystemAttributeName[] = [
  'ApproximateReceiveCount',
  'MessageGroupId',
];

/** The largest visibility timeout SQS accepts, in seconds (12 hours). */
export const MAX_VISIBILITY_TIMEOUT_SECONDS = 43_200;

/**
 * The default idempotency key of an SQS message: the `idempotency-key` message attribute (a `String`
 * attribute the producer sets), else the `MessageId`. A `MessageId` only catches redelivery of the same
 * message (a lapsed visibility timeout, a deleted message delivered again), not a producer that sends the
 * same operation twice. Returns `undefined` only when the message has neither.
 */
export function defaultIdempotencyKey(message: Message): string | undefined {
  const attribute = message.MessageAttributes?.[IDEMPOTENCY_KEY_ATTRIBUTE];
  if (attribute?.StringValue) return attribute.StringValue;
  return message.MessageId || undefined;
}

/**
 * How many times SQS has delivered the message, from its `ApproximateReceiveCount` system attribute
 * (requested by the poller; ask sqs-consumer for it with `attributeNames`/`messageSystemAttributeNames`).
 * 1 when the attribute is missing or unreadable.
 */
export function receiveCount(message: Message): number {
  const raw = Number(message.Attributes?.ApproximateReceiveCount);
  return Number.isSafeInteger(raw) && raw >= 1 ? raw : 1;
}

/** The `MessageGroupId` of a message from a FIFO queue, or `undefined` (standard queue, or not requested). */
export function messageGroupId(message: Message): string | undefined {
  return message.Attributes?.MessageGroupId || undefined;
}

/** The queue name, the last path segment of a queue URL (`https://sqs.<region>.amazonaws.com/<account>/<name>`). */
export function queueNameFromUrl(queueUrl: string): string {
  const trimmed = queueUrl.replace(/\/+$/, '');
  return trimmed.slice(trimmed.lastIndexOf('/') + 1);
}

/**
 * Milliseconds as an SQS visibility timeout: whole seconds rounded up (so the message stays hidden at
 * least that long), clamped to [0, 43200].
 */
export function toVisibilitySeconds(ms: number): number {
  if (!Number.isFinite(ms) || ms <= 0) return 0;
  return Math.min(MAX_VISIBILITY_TIMEOUT_SECONDS, Math.ceil(ms / 1000));
}
