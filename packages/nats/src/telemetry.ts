import {
  ATTR_MESSAGING_MESSAGE_ID,
  type CarrierGetter,
  MessageTelemetry,
  type TelemetryOptions,
} from '@idempotent-consumer/core/kit';
import type { JsMsg } from '@nats-io/jetstream';
import type { MsgHdrs } from '@nats-io/nats-core';
import { MSG_ID_HEADER } from './options';

/** Reads `traceparent` / `tracestate` from NATS message headers. */
export const natsHeaderGetter: CarrierGetter<MsgHdrs> = {
  keys: (headers) => headers.keys(),
  get: (headers, key) => (headers.has(key) ? headers.values(key) : undefined),
};

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
): MessageTelemetry<JsMsg, MsgHdrs> {
  return new MessageTelemetry<JsMsg, MsgHdrs>(
    {
      system: 'nats',
      destinationOf: () => stream,
      consumerGroup: consumer,
      carrierOf: (message) => message.headers,
      getter: natsHeaderGetter,
      describe: (message, span) => {
        const id = message.headers?.get(MSG_ID_HEADER);
        if (id) span.setAttribute(ATTR_MESSAGING_MESSAGE_ID, id);
      },
    },
    options,
  );
}
