/**
 * Reads trace context fields (`traceparent`, `tracestate`) from a message's carrier, for
 * `propagation.extract`: the shape of OpenTelemetry's `TextMapGetter`, one per broker.
 */
export interface CarrierGetter<C> {
  /** The field names the carrier holds. */
  keys(carrier: C): string[];
  /** The value of field `key` (a name in lower case), `undefined` when absent. */
  get(carrier: C, key: string): string | string[] | undefined;
}

/** A map of message headers: AMQP `properties.headers`, Kafka `message.headers`. */
export type HeaderCarrier = Readonly<Record<string, unknown>>;

/**
 * The getter of a header map whose values are strings, `Buffer`s / `Uint8Array`s (UTF-8; Kafka headers,
 * AMQP byte arrays) or arrays of them; any other value reads as absent. Names are matched exactly (the W3C
 * propagator asks for `traceparent` and `tracestate`, in lower case, as OpenTelemetry producers write them).
 */
export const headerCarrierGetter: CarrierGetter<HeaderCarrier> = {
  keys: (carrier) => Object.keys(carrier),
  get(carrier, key) {
    const value = carrier[key];
    if (Array.isArray(value)) {
      const texts = value.map(textOf).filter((t): t is string => t !== undefined);
      return texts.length === 0 ? undefined : texts;
    }
    return textOf(value);
  },
};

/** A header value as text: a string as is, bytes decoded as UTF-8, anything else `undefined`. */
export function textOf(value: unknown): string | undefined {
  if (typeof value === 'string') return value;
  if (value instanceof Uint8Array)
    return Buffer.from(value.buffer, value.byteOffset, value.byteLength).toString('utf8');
  return undefined;
}
