import {
  ATTR_MESSAGING_DESTINATION_PARTITION_ID,
  ATTR_MESSAGING_KAFKA_OFFSET,
  type HeaderCarrier,
  headerCarrierGetter,
  MessageTelemetry,
  type TelemetryOptions,
} from '@idempotent-consumer/core/kit';

/** What the wrappers' telemetry reads of one message: where it came from, and the message. */
export interface TelemetryDelivery {
  readonly topic: string;
  readonly partition: number;
  readonly message: { readonly offset: string; readonly headers?: HeaderCarrier };
}

/**
 * The wrappers' OpenTelemetry instrumentation (core README, "Telemetry"): `messaging.system` `kafka`, the
 * topic as destination, `messaging.destination.partition.id`, `messaging.kafka.offset`, the consumer
 * group (`groupId`) as `messaging.consumer.group.name`; the trace context is read from the message
 * headers (`traceparent`, `tracestate`; `Buffer` values as UTF-8).
 */
export function kafkaTelemetry(
  groupId: string | undefined,
  options: TelemetryOptions | false | undefined,
): MessageTelemetry<TelemetryDelivery, HeaderCarrier> {
  return new MessageTelemetry<TelemetryDelivery, HeaderCarrier>(
    {
      system: 'kafka',
      destinationOf: (delivery) => delivery.topic,
      carrierOf: (delivery) => delivery.message.headers,
      getter: headerCarrierGetter,
      describe: (delivery, span) => {
        span.setAttribute(ATTR_MESSAGING_DESTINATION_PARTITION_ID, String(delivery.partition));
        const offset = Number(delivery.message.offset);
        if (Number.isSafeInteger(offset)) span.setAttribute(ATTR_MESSAGING_KAFKA_OFFSET, offset);
      },
      ...(groupId ? { consumerGroup: groupId } : {}),
    },
    options,
  );
}
