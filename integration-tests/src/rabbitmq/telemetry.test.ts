import { SpanKind, SpanStatusCode } from '@opentelemetry/api';
import { waitFor } from '../../support/net';
import { describeWithServices } from '../../support/service';
import { parentOf, producedTrace, TelemetrySdk } from '../../support/telemetry';
import { acks, RabbitFixture } from './fixture';

describeWithServices(['rabbitmq', 'redis'], 'rabbitmq adapter: OpenTelemetry', (urls) => {
  jest.setTimeout(30_000);
  const fx = RabbitFixture.eachTest(urls);
  let sdk: TelemetrySdk;
  beforeEach(() => {
    sdk = new TelemetrySdk();
  });
  afterEach(() => sdk.close());

  it('a span per delivery continues the producer trace; duplicate and handler error are visible; metrics count outcomes', async () => {
    const { tracerProvider, meterProvider } = sdk;
    const handlerTraces = new Map<string, string | undefined>();
    const { events } = await fx.consumer(
      fx.idempotency({ maxAttempts: 3 }),
      { prefetch: 1, telemetry: { tracerProvider, meterProvider } },
      ({ key, attempt }) => {
        handlerTraces.set(`${key}#${attempt}`, sdk.activeTraceId());
        if (key === 'tel-err' && attempt === 1) throw new Error('first attempt fails');
        return 'ok';
      },
    );
    const first = producedTrace();
    const duplicate = producedTrace();
    const failing = producedTrace();
    fx.publish(
      { n: 1 },
      { messageId: 'tel-1', headers: { traceparent: first.traceparent, tracestate: first.tracestate } },
    );
    fx.publish({ n: 1 }, { messageId: 'tel-1', headers: { traceparent: duplicate.traceparent } });
    fx.publish({ n: 2 }, { messageId: 'tel-err', headers: { traceparent: failing.traceparent } });
    await waitFor('three acks', () => acks(events).length === 3, 20_000);
    const name = `process ${fx.queue}`;
    await waitFor('four spans', () => sdk.spans(name).length === 4);

    const byTrace = (traceId: string) => sdk.spans(name).filter((s) => s.spanContext().traceId === traceId);
    const [span] = byTrace(first.traceId);
    expect(span).toBeDefined();
    expect(span!.kind).toBe(SpanKind.CONSUMER);
    expect(parentOf(span!)?.spanId).toBe(first.spanId);
    expect(parentOf(span!)?.isRemote).toBe(true);
    expect(span!.attributes).toMatchObject({
      'messaging.system': 'rabbitmq',
      'messaging.operation.type': 'process',
      'messaging.operation.name': 'process',
      'messaging.destination.name': fx.queue,
      'messaging.message.id': 'tel-1',
      'idempotency.scope': fx.queue,
      'idempotency.outcome': 'ACQUIRED',
      'idempotency.attempt': 1,
      'idempotency.broker_action': 'ack',
    });
    expect(Number.isSafeInteger(span!.attributes['idempotency.fencing_token'])).toBe(true);
    expect(span!.attributes['idempotency.key']).toBeUndefined();
    expect(span!.status.code).toBe(SpanStatusCode.UNSET);
    // The handler ran with the message's span active.
    expect(handlerTraces.get('tel-1#1')).toBe(first.traceId);

    const [dup] = byTrace(duplicate.traceId);
    expect(dup!.attributes).toMatchObject({
      'idempotency.outcome': 'DUPLICATE',
      'idempotency.broker_action': 'ack',
    });
    expect(parentOf(dup!)?.spanId).toBe(duplicate.spanId);

    // The failed attempt: status ERROR, sent to a delay tier; the retry (its copy keeps the headers) completes.
    const failed = byTrace(failing.traceId);
    const attempt1 = failed.find((s) => s.attributes['idempotency.attempt'] === 1);
    expect(attempt1?.status.code).toBe(SpanStatusCode.ERROR);
    expect(attempt1?.attributes['idempotency.broker_action']).toBe('retry');
    expect(attempt1?.events.map((e) => e.name)).toContain('exception');

    expect(await sdk.counts('idempotency.outcomes', 'idempotency.outcome')).toEqual({
      ACQUIRED: 3,
      DUPLICATE: 1,
    });
    expect(await sdk.counts('idempotency.broker_actions', 'idempotency.broker_action')).toEqual({
      ack: 3,
      retry: 1,
    });
    const handlerDurations = await sdk.metric('idempotency.handler.duration');
    expect(handlerDurations.map((p) => (p.value as { count: number }).count)).toEqual([3]);
    expect(handlerDurations[0]!.attributes).toEqual({
      'messaging.system': 'rabbitmq',
      'messaging.destination.name': fx.queue,
    });
    expect((await sdk.metric('idempotency.in_flight')).map((p) => p.value)).toEqual([0]);
    expect(
      (await sdk.metric('idempotency.store.duration'))
        .map((p) => p.attributes['idempotency.store.operation'])
        .sort(),
    ).toEqual(['claim', 'write']);
  });

  it('a delivery stop() abandons counts once as broker action leave, as the settled event says, and nothing after its handler returns', async () => {
    const { tracerProvider, meterProvider } = sdk;
    const idempotency = fx.idempotency();
    let started = false;
    let release = () => {};
    const { consumer, events } = await fx.consumer(
      idempotency,
      { stopTimeoutMs: 200, telemetry: { tracerProvider, meterProvider } },
      async () => {
        started = true;
        await new Promise<void>((resolve) => (release = resolve));
        return 'late';
      },
    );
    fx.publish({ n: 1 }, { messageId: 'tel-abandoned' });
    await waitFor('the handler to run', () => started);

    expect(await consumer.stop()).toEqual({ abandoned: 1 });

    expect(events.settled.map((e) => e.decision)).toEqual([{ action: 'leave', reason: 'abandoned' }]);
    expect(await sdk.counts('idempotency.broker_actions', 'idempotency.broker_action')).toEqual({ leave: 1 });
    const completed = new Promise((resolve) => idempotency.once('completed', resolve));
    release();
    await completed;
    await waitFor('its span to end', () => sdk.spans(`process ${fx.queue}`).length === 1);
    expect(sdk.spans(`process ${fx.queue}`)[0]!.attributes['idempotency.broker_action']).toBe('leave');
    expect(await sdk.counts('idempotency.broker_actions', 'idempotency.broker_action')).toEqual({ leave: 1 });
  });
});
