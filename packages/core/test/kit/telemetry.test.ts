import { performance } from 'node:perf_hooks';
import { propagation, SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';
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
  SimpleSpanProcessor,
} from '@opentelemetry/sdk-trace-base';
import type { RunResult } from '../../src';
import { MessageTelemetry } from '../../src/kit';
import { loadOpenTelemetryApi } from '../../src/kit/telemetry/load-api';
import { NOOP_MESSAGE_SPAN } from '../../src/kit/telemetry/message-span';
import type { MessageHeaders, MessageTelemetryBinding } from '../../src/kit/telemetry/message-telemetry';

/** A reader collected on demand. */
class ManualReader extends MetricReader {
  constructor() {
    super({ aggregationTemporalitySelector: () => AggregationTemporality.CUMULATIVE });
  }
  protected override async onForceFlush(): Promise<void> {}
  protected override async onShutdown(): Promise<void> {}
}

interface TestMessage {
  readonly id: string;
  readonly headers?: MessageHeaders;
}

const binding: MessageTelemetryBinding<TestMessage> = {
  system: 'rabbitmq',
  destinationOf: () => 'orders',
  headersOf: (m) => m.headers,
  attributesOf: (m) => ({ 'messaging.message.id': m.id }),
};

const TRACE_ID = '4bf92f3577b34da6a3ce929d0e0e4736';
const PARENT_ID = '00f067aa0ba902b7';
const traceparent = `00-${TRACE_ID}-${PARENT_ID}-01`;

const completed: RunResult<unknown> = {
  outcome: 'ACQUIRED',
  fencingToken: 42,
  attempt: 1,
  status: 'completed',
  result: 'ok',
  recorded: true,
  resultOmitted: false,
  durationMs: 1,
};

function sdk() {
  const exporter = new InMemorySpanExporter();
  const tracerProvider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
  const reader = new ManualReader();
  const meterProvider = new MeterProvider({ readers: [reader] });
  const metrics = async () => {
    const { resourceMetrics } = await reader.collect();
    const all = resourceMetrics.scopeMetrics.flatMap((s) => s.metrics);
    return (name: string) =>
      (all.find((m) => m.descriptor.name === name)?.dataPoints ?? []) as DataPoint<unknown>[];
  };
  return { exporter, tracerProvider, meterProvider, metrics };
}

describe('kit telemetry: loading the optional @opentelemetry/api', () => {
  it('is undefined when require throws (the API is not installed)', () => {
    const load = jest.fn(() => {
      throw Object.assign(new Error("Cannot find module '@opentelemetry/api'"), { code: 'MODULE_NOT_FOUND' });
    });
    expect(loadOpenTelemetryApi(load)).toBeUndefined();
    expect(load).toHaveBeenCalledWith('@opentelemetry/api');
  });

  it('is undefined for a module that is not the API', () => {
    expect(loadOpenTelemetryApi(() => ({ trace: {} }))).toBeUndefined();
    expect(loadOpenTelemetryApi(() => undefined)).toBeUndefined();
  });

  it('loads the installed API by default', () => {
    expect(loadOpenTelemetryApi()?.trace).toBe(trace);
  });

  it('without the API, an adapter gets the no-op span and every call on it is harmless', async () => {
    const telemetry = new MessageTelemetry(binding, undefined, () => {
      throw new Error("Cannot find module '@opentelemetry/api'");
    });
    expect(telemetry.enabled).toBe(false);
    const span = telemetry.start({ id: 'm1', headers: { traceparent } }, 'orders');
    expect(span).toBe(NOOP_MESSAGE_SPAN);
    expect(span.run(() => 7)).toBe(7);
    await expect(span.timeHandler(async () => 'done')).resolves.toBe('done');
    span.result(completed, 'k1');
    span.brokerAction('ack');
    span.end(new Error('x'));
  });

  it('`telemetry: false` turns it off', () => {
    const telemetry = new MessageTelemetry(binding, false);
    expect(telemetry.enabled).toBe(false);
    expect(telemetry.start({ id: 'm1' }, 'orders')).toBe(NOOP_MESSAGE_SPAN);
  });

  it('with the API but no SDK registered, a message costs no span object of ours', () => {
    const telemetry = new MessageTelemetry(binding, undefined);
    expect(telemetry.enabled).toBe(true);
    expect(telemetry.start({ id: 'm1', headers: { traceparent } }, 'orders')).toBe(NOOP_MESSAGE_SPAN);
  });
});

describe('kit telemetry: MessageTelemetry on the OpenTelemetry SDK', () => {
  beforeAll(() => propagation.setGlobalPropagator(new W3CTraceContextPropagator()));
  afterAll(() => propagation.disable());

  it('a consumer span continuing the propagated trace, with semconv and idempotency attributes', async () => {
    const { exporter, tracerProvider, meterProvider, metrics } = sdk();
    const telemetry = new MessageTelemetry(binding, { tracerProvider, meterProvider });
    const span = telemetry.start(
      { id: 'm1', headers: { traceparent: Buffer.from(traceparent), tracestate: 'a=1' } },
      'orders-scope',
    );
    await span.run(() => span.timeHandler(async () => 'done'));
    span.result(completed, 'secret-key');
    span.brokerAction('ack');
    span.end();

    const [finished] = exporter.getFinishedSpans();
    expect(finished).toBeDefined();
    expect(finished!.name).toBe('process orders');
    expect(finished!.kind).toBe(SpanKind.CONSUMER);
    expect(finished!.spanContext().traceId).toBe(TRACE_ID);
    expect(finished!.parentSpanContext?.spanId).toBe(PARENT_ID);
    expect(finished!.attributes).toEqual({
      'messaging.system': 'rabbitmq',
      'messaging.operation.type': 'process',
      'messaging.operation.name': 'process',
      'messaging.destination.name': 'orders',
      'messaging.message.id': 'm1',
      'idempotency.scope': 'orders-scope',
      'idempotency.outcome': 'ACQUIRED',
      'idempotency.attempt': 1,
      'idempotency.fencing_token': 42,
      'idempotency.broker_action': 'ack',
    });
    expect(finished!.status.code).toBe(SpanStatusCode.UNSET);

    const points = await metrics();
    expect(points('idempotency.outcomes').map((p) => [p.attributes, p.value])).toEqual([
      [
        {
          'messaging.system': 'rabbitmq',
          'messaging.destination.name': 'orders',
          'idempotency.outcome': 'ACQUIRED',
        },
        1,
      ],
    ]);
    expect(
      points('idempotency.broker_actions').map((p) => p.attributes['idempotency.broker_action']),
    ).toEqual(['ack']);
    expect(points('idempotency.handler.duration')).toHaveLength(1);
    expect(
      points('idempotency.store.duration')
        .map((p) => p.attributes['idempotency.store.operation'])
        .sort(),
    ).toEqual(['claim', 'write']);
    expect(points('idempotency.in_flight').map((p) => p.value)).toEqual([0]);
  });

  it('status ERROR and an exception event when the handler threw; the key only when asked', async () => {
    const { exporter, tracerProvider, meterProvider } = sdk();
    const telemetry = new MessageTelemetry(binding, {
      tracerProvider,
      meterProvider,
      includeIdempotencyKey: true,
    });
    const span = telemetry.start({ id: 'm2' }, 'orders');
    const boom = new Error('boom');
    await expect(span.timeHandler(() => Promise.reject(boom))).rejects.toBe(boom);
    span.result(
      { outcome: 'ACQUIRED', fencingToken: 7, attempt: 2, status: 'released', error: boom, recorded: true },
      'k-2',
    );
    span.brokerAction('retry');
    span.end();
    const [finished] = exporter.getFinishedSpans();
    expect(finished!.status).toEqual({ code: SpanStatusCode.ERROR, message: 'Error: boom' });
    expect(finished!.events.map((e) => e.name)).toEqual(['exception']);
    expect(finished!.attributes['idempotency.key']).toBe('k-2');
    expect(finished!.parentSpanContext).toBeUndefined(); // no traceparent: a root span (no active context)
  });

  it('a span started when describing the message throws is ended, not left open', () => {
    const { exporter, tracerProvider } = sdk();
    const failing: MessageTelemetryBinding<TestMessage> = {
      ...binding,
      attributesOf: () => {
        throw new Error('an SDK or binding bug');
      },
    };
    const telemetry = new MessageTelemetry(failing, { tracerProvider });
    expect(telemetry.start({ id: 'm6' }, 'orders')).toBe(NOOP_MESSAGE_SPAN);
    // The SDK started one span: it must end (an open span is never exported and its memory is kept).
    expect(exporter.getFinishedSpans().map((s) => s.name)).toEqual(['process orders']);
  });

  it('a DUPLICATE settles without a handler run: outcome counted, no handler duration', async () => {
    const { exporter, tracerProvider, meterProvider, metrics } = sdk();
    const telemetry = new MessageTelemetry(binding, { tracerProvider, meterProvider });
    const span = telemetry.start({ id: 'm3' }, 'orders');
    span.result(
      {
        outcome: 'DUPLICATE',
        fencingToken: 7,
        attempt: 1,
        result: 'ok',
        hasResult: true,
        completedAtMs: 1,
      },
      'k',
    );
    span.end();
    expect(exporter.getFinishedSpans()[0]!.attributes['idempotency.outcome']).toBe('DUPLICATE');
    expect(exporter.getFinishedSpans()[0]!.attributes['idempotency.key']).toBeUndefined();
    const points = await metrics();
    expect(points('idempotency.handler.duration')).toHaveLength(0);
    expect(
      points('idempotency.store.duration').map((p) => p.attributes['idempotency.store.operation']),
    ).toEqual(['claim']);
  });
  it('an UNPROTECTED run (no claim) records its handler time and no store duration', async () => {
    const { tracerProvider, meterProvider, metrics } = sdk();
    const telemetry = new MessageTelemetry(binding, { tracerProvider, meterProvider });
    const span = telemetry.start({ id: 'm4' }, 'orders');
    await span.timeHandler(() => 'done');
    span.result({ outcome: 'UNPROTECTED', status: 'completed', result: 'done', storeError: undefined });
    span.end();
    const points = await metrics();
    expect(points('idempotency.handler.duration')).toHaveLength(1);
    expect(points('idempotency.store.duration')).toHaveLength(0);
    expect(points('idempotency.outcomes').map((p) => p.attributes['idempotency.outcome'])).toEqual([
      'UNPROTECTED',
    ]);
    expect(points('idempotency.in_flight').map((p) => p.value)).toEqual([0]);
  });

  it('a handler that outlives its run (handlerTimeoutMs) is timed from its own start; its late return leaves the next round alone', async () => {
    const { meterProvider, metrics } = sdk();
    const telemetry = new MessageTelemetry(binding, { meterProvider });
    let now = 1_000;
    const clock = jest.spyOn(performance, 'now').mockImplementation(() => now);
    try {
      const span = telemetry.start({ id: 'm5' }, 'orders');
      let finish!: () => void;
      const late = span.timeHandler(() => new Promise<void>((resolve) => (finish = resolve)));
      // The runner gave up on it after handlerTimeoutMs (1.5 s) and released the claim: the result comes
      // before the handler returns.
      now = 2_500;
      span.result({
        outcome: 'ACQUIRED',
        fencingToken: 1,
        attempt: 1,
        status: 'released',
        error: new Error('ran longer than handlerTimeoutMs'),
        recorded: true,
      });
      // An inline retry (Kafka) claims again: the holder is still on it.
      span.claiming();
      now = 4_000; // the first handler returns, 3 s after it started
      finish();
      await late;
      now = 4_250;
      span.result({ outcome: 'CONFLICT', retryAfterMs: 500, fencingToken: 1, attempt: 1 });
      span.end();
    } finally {
      clock.mockRestore();
    }
    const points = await metrics();
    const handler = points('idempotency.handler.duration').map(
      (p) => p.value as { count: number; sum: number },
    );
    expect(handler).toEqual([expect.objectContaining({ count: 1, sum: 3 })]);
    // Claim round trips: 0 s before the handler, 1.75 s for the CONFLICT (2.5 s to 4.25 s); no write (the
    // late return is not the end of a handler of the CONFLICT round).
    const store = points('idempotency.store.duration').map((p) => [
      p.attributes['idempotency.store.operation'],
      (p.value as { sum: number }).sum,
    ]);
    expect(store).toEqual([['claim', 1.75]]);
  });
});
