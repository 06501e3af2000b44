import {
  ATTR_MESSAGING_MESSAGE_ID,
  ATTR_MESSAGING_RABBITMQ_DELIVERY_TAG,
  type HeaderCarrier,
  headerCarrierGetter,
  MessageTelemetry,
  type TelemetryOptions,
} from '@idempotent-consumer/core/kit';
import type { ConsumeMessage } from 'amqplib';

/**
 * The consumer's OpenTelemetry instrumentation (core README, "Telemetry"): `messaging.system`
 * `rabbitmq`, the work queue as destination, the AMQP `messageId` as `messaging.message.id`, the delivery
 * tag; the trace context is read from the message headers (`traceparent`, `tracestate`).
 */
export function consumerTelemetry(
  queue: string,
  options: TelemetryOptions | false | undefined,
): MessageTelemetry<ConsumeMessage, HeaderCarrier> {
  return new MessageTelemetry<ConsumeMessage, HeaderCarrier>(
    {
      system: 'rabbitmq',
      destinationOf: () => queue,
      carrierOf: (message) => message.properties.headers ?? undefined,
      getter: headerCarrierGetter,
      describe: (message, span) => {
        const id: unknown = message.properties.messageId;
        if (typeof id === 'string' && id !== '') span.setAttribute(ATTR_MESSAGING_MESSAGE_ID, id);
        span.setAttribute(ATTR_MESSAGING_RABBITMQ_DELIVERY_TAG, message.fields.deliveryTag);
      },
    },
    options,
  );
}
