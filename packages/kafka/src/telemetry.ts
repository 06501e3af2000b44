import type { TelemetryOptions } from '@idempotent-consumer/core';
import { MessageTelemetry } from '@idempotent-consumer/core/kit';

/** What the Kafka telemetry reads of a message: its topic, partition and offset, and its headers. */
export interface TelemetryDelivery {
  readonly topic: string;
  readonly partition: number;
  readonly message: { readonly offset: string; readonly headers?: Readonly<Record<string, unknown>> };
}

/**
 * The telemetry of a Kafka wrapper: `messaging.system` `kafka`, the topic as destination, the group as
 * `messaging.consumer.group.name`, the partition and offset on each span, the trace context from the headers.
 */
export function kafkaTelemetry(
  groupId: string | undefined,
  options: TelemetryOptions | false | undefined,
): MessageTelemetry<TelemetryDelivery> {
  return new MessageTelemetry<TelemetryDelivery>(
    {
      system: 'kafka',
      destinationOf: (delivery) => delivery.topic,
      headersOf: (delivery) => delivery.message.headers,
      attributesOf: (delivery) => {
        const offset = Number(delivery.message.offset);
        const partition = { 'messaging.destination.partition.id': String(delivery.partition) };
        return Number.isSafeInteger(offset) ? { ...partition, 'messaging.kafka.offset': offset } : partition;
      },
      ...(groupId ? { consumerGroup: groupId } : {}),
    },
    options,
  );
}
