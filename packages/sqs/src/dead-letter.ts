import { type Message, type MessageAttributeValue, SendMessageCommand } from '@aws-sdk/client-sqs';
import { type DeadLetterReason, describeError, type RunOutcome } from '@idempotent-consumer/core';
import { DEAD_LETTER_FIELDS, NO_CLAIM_OUTCOME } from '@idempotent-consumer/core/kit';
import { messageGroupId } from './message-attributes';
import { abortableBy, type SqsClientLike } from './sqs-client';

/** SQS allows at most 10 message attributes per message. */
const MAX_MESSAGE_ATTRIBUTES = 10;

/**
 * Attributes the adapter adds to a dead-lettered copy, while the 10-attribute limit allows: the core's
 * `DEAD_LETTER_FIELDS` (the same names the Kafka and RabbitMQ adapters write as headers) and the original
 * `MessageId`. All are `String` attributes.
 */
export const DEAD_LETTER_ATTRIBUTES = {
  ...DEAD_LETTER_FIELDS,
  /** The `MessageId` of the original message. */
  originalMessageId: 'x-original-message-id',
} as const;

/** What a dead-lettered copy says about its idempotency record, besides the reason and the error. */
export interface DeadLetterDetails {
  /** The claim outcome; `undefined` (written `NONE`) when no claim was made. */
  readonly outcome?: RunOutcome | undefined;
  /** The record's attempt count; `0` when no claim was made. */
  readonly attempt?: number | undefined;
  /** The idempotency key, `undefined` when the message had none. */
  readonly key?: string | undefined;
  /** The idempotency scope. */
  readonly scope?: string | undefined;
}

/**
 * Sends a copy of `message` to the dead-letter queue `deadLetterQueueUrl`: the same body and message
 * attributes, plus (in this order, each added only while the message has fewer than 10 attributes, and
 * never over an attribute of the same name) the reason, the error, the original `MessageId`, then the claim
 * outcome, the attempt, the key and the scope of `details` ({@link DEAD_LETTER_ATTRIBUTES}). A copy for a FIFO dead-letter queue keeps the `MessageGroupId` and is
 * deduplicated by the original `MessageId`, so sending it twice after a crash stores it once (within the
 * 5-minute deduplication interval). Rejects with the SQS error when the send fails or `signal` aborted it.
 */
export async function sendToDeadLetterQueue(
  sqs: SqsClientLike,
  deadLetterQueueUrl: string,
  message: Message,
  reason: DeadLetterReason,
  error: unknown,
  details: DeadLetterDetails = {},
  signal?: AbortSignal,
): Promise<void> {
  const attributes: Record<string, MessageAttributeValue> = {};
  for (const [name, value] of Object.entries(message.MessageAttributes ?? {})) {
    // ReceiveMessage returns the attribute with its MD5 bookkeeping stripped; copy the value fields only.
    attributes[name] = {
      DataType: value.DataType,
      StringValue: value.StringValue,
      BinaryValue: value.BinaryValue,
    };
  }
  const extra: [string, string][] = [
    [DEAD_LETTER_ATTRIBUTES.reason, reason],
    [DEAD_LETTER_ATTRIBUTES.error, error === undefined ? reason : describeError(error)],
    [DEAD_LETTER_ATTRIBUTES.originalMessageId, message.MessageId ?? ''],
    [DEAD_LETTER_ATTRIBUTES.outcome, details.outcome ?? NO_CLAIM_OUTCOME],
    [DEAD_LETTER_ATTRIBUTES.attempt, String(details.attempt ?? 0)],
    [DEAD_LETTER_ATTRIBUTES.key, details.key ?? ''],
    [DEAD_LETTER_ATTRIBUTES.scope, details.scope ?? ''],
  ];
  for (const [name, value] of extra) {
    if (Object.keys(attributes).length >= MAX_MESSAGE_ATTRIBUTES) break;
    if (value !== '' && !(name in attributes)) attributes[name] = { DataType: 'String', StringValue: value };
  }
  const fifo = deadLetterQueueUrl.endsWith('.fifo');
  await sqs.send(
    new SendMessageCommand({
      QueueUrl: deadLetterQueueUrl,
      MessageBody: message.Body ?? '',
      MessageAttributes: attributes,
      ...(fifo
        ? {
            MessageGroupId: messageGroupId(message) ?? 'dead-letter',
            MessageDeduplicationId: (message.MessageId ?? reason).slice(0, 128),
          }
        : {}),
    }),
    abortableBy(signal),
  );
}
