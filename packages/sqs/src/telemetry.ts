import type { Message } from '@aws-sdk/client-sqs';
import type { TelemetryOptions } from '@idempotent-consumer/core';
import { MessageTelemetry } from '@idempotent-consumer/core/kit';
import { queueNameFromUrl } from './message-attributes';

/** The text message attributes of a message, where its trace context travels (`traceparent`). */
function textAttributes(message: Message): Record<string, string> | undefined {
  const attributes = message.MessageAttributes;
  if (attributes === undefined) return undefined;
  const text: Record<string, string> = {};
  for (const [name, value] of Object.entries(attributes)) {
    if (value.DataType?.startsWith('String') && value.StringValue !== undefined)
      text[name] = value.StringValue;
  }
  return text;
}

/**
 * The telemetry of an SQS consumer: `messaging.system` `aws_sqs`, the queue's name as destination, the
 * `MessageId` as `messaging.message.id`, the trace context from the string message attributes.
 */
export function sqsTelemetry(
  queueUrl: string,
  options: TelemetryOptions | false | undefined,
): MessageTelemetry<Message> {
  const queue = queueNameFromUrl(queueUrl);
  return new MessageTelemetry<Message>(
    {
      system: 'aws_sqs',
      destinationOf: () => queue,
      headersOf: textAttributes,
      attributesOf: (message): Record<string, string> =>
        message.MessageId ? { 'messaging.message.id': message.MessageId } : {},
    },
    options,
  );
}
