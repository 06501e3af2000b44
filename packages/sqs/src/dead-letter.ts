import { type Message, type MessageAttributeValue, SendMessageCommand } from '@aws-sdk/client-sqs';
import { describeError } from '@idempotent-consumer/core';
import type { DeadLetterReason } from './disposition';
import { messageGroupId } from './message-attributes';
import type { SqsClientLike } from './sqs-client';

/** SQS allows at most 10 message attributes per message. */
const MAX_MESSAGE_ATTRIBUTES = 10;

/** Attributes the adapter adds to a dead-lettered copy, while the 10-attribute limit allows. */
export const DEAD_LETTER_ATTRIBUTES = {
  reason: 'x-dead-letter-reason',
  error: 'x-error',
  originalMessageId: 'x-original-message-id',
} as const;

/**
 * Sends a copy of `message` to the dead-letter queue `deadLetterQueueUrl`: the same body and message
 * attributes, plus the reason, the error and the original `MessageId` (each added only while the message
 * has fewer than 10 attributes). A copy for a FIFO dead-letter queue keeps the `MessageGroupId` and is
 * deduplicated by the original `MessageId`, so sending it twice after a crash stores it once (within the
 * 5-minute deduplication interval). Rejects with the SQS error when the send fails.
 */
export async function sendToDeadLetterQueue(
  sqs: SqsClientLike,
  deadLetterQueueUrl: string,
  message: Message,
  reason: DeadLetterReason,
  error: unknown,
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
  );
}
