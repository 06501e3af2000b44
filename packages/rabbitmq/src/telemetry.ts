import type { TelemetryOptions } from '@idempotent-consumer/core';
import { MessageTelemetry } from '@idempotent-consumer/core/kit';
import type { ConsumeMessage } from 'amqplib';

/**
 * The consumer's OpenTelemetry instrumentation (core README, "Telemetry"): `messaging.system`
 * `rabbitmq`, the work queue as destination, the AMQP `messageId` as `messaging.message.id`, the delivery
 * tag; the trace context is read from the message headers (`traceparent`, `tracestate`).
 */
export function consumerTelemetry(
  queue: string,
  options: TelemetryOptions | false | undefined,
): MessageTelemetry<ConsumeMessage> {
  return new MessageTelemetry<ConsumeMessage>(
    {
      system: 'rabbitmq',
      destinationOf: () => queue,
      headersOf: (message) => message.properties.headers ?? undefined,
      attributesOf: (message) => {
        const id: unknown = message.properties.messageId;
        const tag = { 'messaging.rabbitmq.message.delivery_tag': message.fields.deliveryTag };
        return typeof id === 'string' && id !== '' ? { ...tag, 'messaging.message.id': id } : tag;
      },
    },
    options,
  );
}
