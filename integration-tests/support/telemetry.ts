import { randomBytes } from 'node:crypto';
import { context, propagation, type SpanContext, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import {
  AggregationTemporality,
  type DataPoint,
  MeterProvider,
  MetricReader,
} from '@opentelemetry/sdk-metrics';
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  type ReadableSpan,
  SimpleSpanProcessor,
} from '@opentelemetry/sdk-trace-base';

/** A metric reader collected on demand (cumulative). */
class ManualReader extends MetricReader {
  constructor() {
    super({ aggregationTemporalitySelector: () => AggregationTemporality.CUMULATIVE });
  }
  protected override async onForceFlush(): Promise<void> {}
  protected override async onShutdown(): Promise<void> {}
}

/**
 * The OpenTelemetry SDK with in-memory exporters, for the adapters' telemetry tests: a tracer provider
 * whose finished spans are kept, a meter provider read on demand, the W3C trace-context propagator and an
 * AsyncLocalStorage context manager registered globally (so a handler sees the message's span as active).
 * Pass `tracerProvider` and `meterProvider` to an adapter's `telemetry` option.
 */
export class TelemetrySdk {
  readonly exporter = new InMemorySpanExporter();
  readonly tracerProvider = new BasicTracerProvider({
    spanProcessors: [new SimpleSpanProcessor(this.exporter)],
  });
  readonly #reader = new ManualReader();
  readonly meterProvider = new MeterProvider({ readers: [this.#reader] });
  readonly #contextManager = new AsyncLocalStorageContextManager();

  constructor() {
    this.#contextManager.enable();
    context.setGlobalContextManager(this.#contextManager);
    propagation.setGlobalPropagator(new W3CTraceContextPropagator());
  }

  /** The finished spans named `name`. */
  spans(name: string): ReadableSpan[] {
    return this.exporter.getFinishedSpans().filter((s) => s.name === name);
  }

  /** The data points of metric `name` (cumulative since the start). */
  async metric(name: string): Promise<DataPoint<unknown>[]> {
    const { resourceMetrics } = await this.#reader.collect();
    const metric = resourceMetrics.scopeMetrics
      .filter((s) => s.scope.name === 'idempotent-consumer')
      .flatMap((s) => s.metrics)
      .find((m) => m.descriptor.name === name);
    return (metric?.dataPoints ?? []) as DataPoint<unknown>[];
  }

  /** The sum of the counter `name`'s points by the value of attribute `by`. */
  async counts(name: string, by: string): Promise<Record<string, number>> {
    const counts: Record<string, number> = {};
    for (const point of await this.metric(name)) {
      const key = String(point.attributes[by]);
      counts[key] = (counts[key] ?? 0) + (point.value as number);
    }
    return counts;
  }

  /** The trace id of the span active now (in a handler: the message's span), `undefined` when none. */
  activeTraceId(): string | undefined {
    return trace.getSpan(context.active())?.spanContext().traceId;
  }

  async close(): Promise<void> {
    await this.tracerProvider.shutdown();
    await this.meterProvider.shutdown();
    context.disable();
    propagation.disable();
  }
}

/** A producer's span context, as a `traceparent` header carries it (sampled). */
export interface ProducedTrace {
  readonly traceId: string;
  readonly spanId: string;
  readonly traceparent: string;
  readonly tracestate: string;
}

/** A fresh trace id and parent span id, and their W3C `traceparent` / `tracestate` values. */
export function producedTrace(): ProducedTrace {
  const traceId = randomBytes(16).toString('hex');
  const spanId = randomBytes(8).toString('hex');
  return { traceId, spanId, traceparent: `00-${traceId}-${spanId}-01`, tracestate: 'vendor=test' };
}

/** The parent span context of a finished span (SDK 2.x `parentSpanContext`). */
export function parentOf(span: ReadableSpan): SpanContext | undefined {
  return span.parentSpanContext;
}
