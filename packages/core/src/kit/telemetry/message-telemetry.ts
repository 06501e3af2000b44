import type { Span, Tracer } from '@opentelemetry/api';
import { ActiveMessageSpan } from './active-message-span';
import { ATTR_IDEMPOTENCY_SCOPE } from './attributes';
import { headerCarrierGetter } from './carrier-getter';
import { TelemetryDestination } from './destination';
import { createInstruments, type TelemetryInstruments } from './instruments';
import { loadOpenTelemetryApi, type OpenTelemetryApi } from './load-api';
import { type MessageSpan, NOOP_MESSAGE_SPAN } from './message-span';
import { INSTRUMENTATION_SCOPE } from './metric-names';
import type { MeterProviderLike, TelemetryOptions } from './telemetry-options';

/** Headers that may carry a message's trace context: values as text, bytes, or lists of them. */
export type MessageHeaders = Readonly<Record<string, unknown>>;

/** How an adapter describes its messages to {@link MessageTelemetry}; `M` is what it hands to `start`. */
export interface MessageTelemetryBinding<M> {
  /** `messaging.system`: `rabbitmq`, `kafka`, `aws_sqs`. */
  readonly system: string;
  /** `messaging.destination.name` of a message (its queue or topic); also in the span name `process <destination>`. */
  readonly destinationOf: (message: M) => string;
  /** The headers that carry the message's trace context (W3C `traceparent`), `undefined` for none. */
  readonly headersOf: (message: M) => MessageHeaders | undefined;
  /** The per-message attributes (`messaging.message.id`, Kafka's offset), read only for a span that records. */
  readonly attributesOf?: (message: M) => Readonly<Record<string, string | number>>;
  /** `messaging.consumer.group.name` (Kafka's `groupId`), when there is one. */
  readonly consumerGroup?: string;
}

/** At most this many destinations keep their attribute sets (a consumer of many topics starts over). */
const MAX_DESTINATIONS = 1024;

/**
 * An adapter's OpenTelemetry instrumentation, through the optional `@opentelemetry/api` (absent: every
 * message gets {@link NOOP_MESSAGE_SPAN}). {@link MessageTelemetry.start} opens one span per delivered
 * message, kind CONSUMER, named `process <destination>`, whose parent is the trace context propagated in
 * the message (W3C `traceparent` / `tracestate`, read from its headers with `propagation.extract`),
 * else the active context; the adapter runs the message inside it ({@link MessageSpan.run}), times its
 * handler, and reports its result and broker decision. Metrics go to the meter `idempotent-consumer`.
 *
 * When no SDK is registered the per-message cost is one non-recording span from the API's no-op tracer
 * and no attribute objects: attribute sets are built once per destination, and per-message attributes
 * are set only on a span that records.
 */
export class MessageTelemetry<M> {
  readonly #binding: MessageTelemetryBinding<M>;
  readonly #api: OpenTelemetryApi | undefined;
  readonly #tracer: Tracer | undefined;
  readonly #meterProvider: MeterProviderLike | undefined;
  readonly #includeIdempotencyKey: boolean;
  /** `undefined`: not created yet (the first message creates them); `null`: metrics are off (a no-op meter). */
  #instruments: TelemetryInstruments | null | undefined;
  readonly #destinations = new Map<string, TelemetryDestination>();
  #last: TelemetryDestination | undefined;

  /**
   * @param options - the adapter's `telemetry` option (see `checkTelemetryOption`): `false` turns
   *   telemetry off; `undefined` uses the global providers.
   * @param load - loads `@opentelemetry/api` (see `loadOpenTelemetryApi`); for tests.
   */
  constructor(
    binding: MessageTelemetryBinding<M>,
    options: TelemetryOptions | false | undefined,
    load?: (id: string) => unknown,
  ) {
    this.#binding = binding;
    const api = options === false ? undefined : loadOpenTelemetryApi(load);
    const chosen = options || undefined;
    this.#api = api;
    this.#includeIdempotencyKey = chosen?.includeIdempotencyKey === true;
    this.#meterProvider = chosen?.meterProvider;
    if (api) {
      const provider = chosen?.tracerProvider ?? api.trace.getTracerProvider();
      this.#tracer = provider.getTracer(INSTRUMENTATION_SCOPE) as Tracer;
    }
  }

  /** Whether `@opentelemetry/api` was loaded and telemetry is not turned off. */
  get enabled(): boolean {
    return this.#api !== undefined;
  }

  /**
   * Starts the telemetry of one message: its span (see the class description), `idempotency.scope` on
   * it (none when `scope` is `undefined`: the adapter could not tell it, a scope function threw). Returns {@link NOOP_MESSAGE_SPAN} when telemetry is off or nothing would record (no SDK, no
   * propagated trace). Never throws: when it fails after the span started (a binding's or SDK's bug), the
   * span is ended and the message gets {@link NOOP_MESSAGE_SPAN}.
   */
  start(message: M, scope: string | undefined): MessageSpan {
    const api = this.#api;
    if (api === undefined) return NOOP_MESSAGE_SPAN;
    let span: Span | undefined;
    try {
      if (this.#instruments === undefined) this.#instruments = this.#createInstruments(api);
      const instruments = this.#instruments ?? undefined;
      const destination = this.#destination(api, this.#binding.destinationOf(message));
      const carrier = this.#binding.headersOf(message);
      const active = api.context.active();
      const parent =
        carrier === undefined ? active : api.propagation.extract(active, carrier, headerCarrierGetter);
      span = this.#tracer!.startSpan(destination.spanName, destination.spanOptions, parent);
      const recording = span.isRecording();
      if (!recording && instruments === undefined && !api.trace.isSpanContextValid(span.spanContext())) {
        return NOOP_MESSAGE_SPAN;
      }
      if (recording) {
        if (scope !== undefined) span.setAttribute(ATTR_IDEMPOTENCY_SCOPE, scope);
        const attributes = this.#binding.attributesOf?.(message);
        if (attributes) span.setAttributes(attributes);
      }
      return new ActiveMessageSpan({
        api,
        span,
        recording,
        context: api.trace.setSpan(parent, span),
        instruments,
        destination,
        includeIdempotencyKey: this.#includeIdempotencyKey,
      });
    } catch {
      // Telemetry never stops a message; a span already started still ends, or it would stay open.
      try {
        span?.end();
      } catch {
        // The span's own bug: nothing more to do for it.
      }
      return NOOP_MESSAGE_SPAN;
    }
  }

  #createInstruments(api: OpenTelemetryApi): TelemetryInstruments | null {
    const meter = (this.#meterProvider ?? api.metrics.getMeterProvider()).getMeter(
      INSTRUMENTATION_SCOPE,
    ) as ReturnType<OpenTelemetryApi['metrics']['getMeter']>;
    if (typeof api.createNoopMeter === 'function' && meter === api.createNoopMeter()) return null;
    return createInstruments(meter);
  }

  #destination(api: OpenTelemetryApi, name: string): TelemetryDestination {
    const last = this.#last;
    if (last !== undefined && last.name === name) return last;
    let destination = this.#destinations.get(name);
    if (destination === undefined) {
      if (this.#destinations.size >= MAX_DESTINATIONS) this.#destinations.clear();
      destination = new TelemetryDestination(
        this.#binding.system,
        name,
        this.#binding.consumerGroup,
        api.SpanKind.CONSUMER,
      );
      this.#destinations.set(name, destination);
    }
    this.#last = destination;
    return destination;
  }
}
