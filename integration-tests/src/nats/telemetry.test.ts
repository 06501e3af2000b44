import { SpanKind } from '@opentelemetry/api';
import { waitFor } from '../../support/net';
import { describeWithServices } from '../../support/service';
import { parentOf, producedTrace, TelemetrySdk } from '../../support/telemetry';
import { acks, NatsFixture } from './fixture';

describeWithServices(['nats', 'redis'], 'nats adapter: OpenTelemetry', (urls) => {
  const fx = NatsFixture.eachTest(urls);
  let sdk: TelemetrySdk;
  beforeEach(() => {
    sdk = new TelemetrySdk();
  });
  afterEach(() => sdk.close());

  it('a span per message continues the traceparent header, with messaging.system nats; metrics count outcomes and broker actions', async () => {
    const handlerTraces: (string | undefined)[] = [];
    const telemetry = { tracerProvider: sdk.tracerProvider, meterProvider: sdk.meterProvider };
    const { events } = await fx.consumer(fx.idempotency(), { telemetry, concurrency: 1 }, () => {
      handlerTraces.push(sdk.activeTraceId());
    });
    const first = producedTrace();
    const second = producedTrace();
    const context = (t: typeof first) => ({ traceparent: t.traceparent, tracestate: t.tracestate });
    await fx.publish('tel-1', { amount: 1 }, context(first));
    await waitFor('the first acked', () => acks(events).length === 1);
    await fx.publish('tel-1', { amount: 1 }, context(second));
    await waitFor('the duplicate acked', () => acks(events).length === 2);
    const name = `process ${fx.stream}`;
    await waitFor('two spans', () => sdk.spans(name).length === 2);

    const [span] = sdk.spans(name).filter((s) => s.spanContext().traceId === first.traceId);
    expect(span!.kind).toBe(SpanKind.CONSUMER);
    expect(parentOf(span!)?.spanId).toBe(first.spanId);
    expect(span!.attributes).toMatchObject({
      'messaging.system': 'nats',
      'messaging.operation.type': 'process',
      'messaging.destination.name': fx.stream,
      'messaging.consumer.group.name': fx.durable,
      'messaging.message.id': 'tel-1',
      'idempotency.scope': `${fx.stream}/${fx.durable}`,
      'idempotency.outcome': 'ACQUIRED',
      'idempotency.broker_action': 'ack',
    });
    expect(handlerTraces).toEqual([first.traceId]);
    const [dup] = sdk.spans(name).filter((s) => s.spanContext().traceId === second.traceId);
    expect(dup!.attributes).toMatchObject({
      'idempotency.outcome': 'DUPLICATE',
      'idempotency.broker_action': 'ack',
    });
    expect(await sdk.counts('idempotency.outcomes', 'idempotency.outcome')).toEqual({
      ACQUIRED: 1,
      DUPLICATE: 1,
    });
    expect(await sdk.counts('idempotency.broker_actions', 'idempotency.broker_action')).toEqual({ ack: 2 });
  });
});
