import type { Message, MessageAttributeValue } from '@aws-sdk/client-sqs';
import {
  ATTR_MESSAGING_MESSAGE_ID,
  type CarrierGetter,
  MessageTelemetry,
  type TelemetryOptions,
} from '@idempotent-consumer/core/kit';
import { queueNameFromUrl } from './message-attributes';

/** The carrier of an SQS message's trace context: its message attributes. */
export type SqsAttributeCarrier = Readonly<Record<string, MessageAttributeValue>>;

/**
 * Reads `traceparent` / `tracestate` from message attributes of data type `String` (or a `String.*`
 * custom type); binary and number attributes read as absent. The `AWSTraceHeader` system attribute (X-Ray)
 * is not read.
 */
export const sqsAttributeGetter: CarrierGetter<SqsAttributeCarrier> = {
  keys: (carrier) => Object.keys(carrier),
  get(carrier, key) {
    const attribute = carrier[key];
    if (attribute?.DataType === undefined || !attribute.DataType.startsWith('String')) return undefined;
    return attribute.StringValue;
  },
};

/**
 * The consumer's OpenTelemetry instrumentation (core README, "Telemetry"): `messaging.system` `aws_sqs`,
 * the queue name (from the queue URL) as destination, the `MessageId` as `messaging.message.id`; the
 * trace context is read from the message attributes (`traceparent`, `tracestate`).
 */
export function sqsTelemetry(
  queueUrl: string,
  options: TelemetryOptions | false | undefined,
): MessageTelemetry<Message, SqsAttributeCarrier> {
  const queue = queueNameFromUrl(queueUrl);
  return new MessageTelemetry<Message, SqsAttributeCarrier>(
    {
      system: 'aws_sqs',
      destinationOf: () => queue,
      carrierOf: (message) => message.MessageAttributes,
      getter: sqsAttributeGetter,
      describe: (message, span) => {
        if (message.MessageId) span.setAttribute(ATTR_MESSAGING_MESSAGE_ID, message.MessageId);
      },
    },
    options,
  );
}
