import type { TelemetryOptions } from '@idempotent-consumer/core';
import { MessageTelemetry } from '@idempotent-consumer/core/kit';
import type { JsMsg } from '@nats-io/jetstream';
import { MSG_ID_HEADER } from './options';

/** The W3C trace context headers of a message, those it has. */
function traceHeaders(message: JsMsg): Record<string, string> | undefined {
  const headers = message.headers;
  if (!headers) return undefined;
  const found: Record<string, string> = {};
  for (const name of ['traceparent', 'tracestate']) {
    if (headers.has(name)) found[name] = headers.get(name);
  }
  return found;
}

/**
 * The consumer's OpenTelemetry instrumentation (core README, "Telemetry"): `messaging.system` `nats`,
 * the stream as destination (a subject per message would make a destination per key), the durable
 * consumer as consumer group, `Nats-Msg-Id` as `messaging.message.id`; the trace context is read from
 * the headers.
 */
export function natsTelemetry(
  stream: string,
  consumer: string,
  options: TelemetryOptions | false | undefined,
): MessageTelemetry<JsMsg> {
  return new MessageTelemetry<JsMsg>(
    {
      system: 'nats',
      destinationOf: () => stream,
      consumerGroup: consumer,
      headersOf: traceHeaders,
      attributesOf: (message): Record<string, string> => {
        const id = message.headers?.get(MSG_ID_HEADER);
        return id ? { 'messaging.message.id': id } : {};
      },
    },
    options,
  );
}
