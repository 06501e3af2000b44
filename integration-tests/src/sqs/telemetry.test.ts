import { SendMessageCommand } from '@aws-sdk/client-sqs';
import { IdempotentSqsPoller, type SqsIdempotencyEvents } from '@idempotent-consumer/sqs';
import { SpanKind } from '@opentelemetry/api';
import { waitFor } from '../../support/net';
import { describeWithServices } from '../../support/service';
import { SqsFixture } from '../../support/sqs-fixture';
import { type ProducedTrace, parentOf, producedTrace, TelemetrySdk } from '../../support/telemetry';

jest.setTimeout(60_000);

describeWithServices(['redis', 'sqs'], 'sqs poller: OpenTelemetry', ({ redis, sqs }) => {
  const fx = SqsFixture.forSuite(redis, sqs);
  let sdk: TelemetrySdk;
  let poller: IdempotentSqsPoller | undefined;
  beforeEach(() => {
    sdk = new TelemetrySdk();
  });
  afterEach(async () => {
    await poller?.stop();
    await sdk.close();
  });

  /** Sends a message with key `key` and the trace context of `produced` in String message attributes. */
  async function send(queueUrl: string, key: string, produced: ProducedTrace): Promise<string> {
    const out = await fx.sqs.send(
      new SendMessageCommand({
        QueueUrl: queueUrl,
        MessageBody: 'pay',
        MessageAttributes: {
          'idempotency-key': { DataType: 'String', StringValue: key },
          traceparent: { DataType: 'String', StringValue: produced.traceparent },
          tracestate: { DataType: 'String', StringValue: produced.tracestate },
        },
      }),
    );
    return out.MessageId!;
  }

  it('a span per message continues the producer trace (message attributes); the duplicate is DUPLICATE; metrics count outcomes', async () => {
    const q = await fx.queue('tel');
    const queueName = q.url.slice(q.url.lastIndexOf('/') + 1);
    const idempotency = fx.idempotency({ leaseMs: 3000 });
    const handlerTraces: (string | undefined)[] = [];
    const settled: SqsIdempotencyEvents['settled'][0][] = [];
    poller = new IdempotentSqsPoller(
      { idempotency, sqs: fx.sqs },
      {
        queueUrl: q.url,
        concurrency: 1,
        waitTimeSeconds: 1,
        telemetry: { tracerProvider: sdk.tracerProvider, meterProvider: sdk.meterProvider },
      },
      () => {
        handlerTraces.push(sdk.activeTraceId());
        return 'ok';
      },
    );
    poller.on('settled', (e) => settled.push(e));
    poller.start();
    const first = producedTrace();
    const second = producedTrace();
    const firstId = await send(q.url, 'tel-1', first);
    await waitFor('the first message deleted', () => settled.length === 1);
    await send(q.url, 'tel-1', second);
    await waitFor('the duplicate deleted', () => settled.length === 2);
    const name = `process ${queueName}`;
    await waitFor('two spans', () => sdk.spans(name).length === 2);

    const [span] = sdk.spans(name).filter((s) => s.spanContext().traceId === first.traceId);
    expect(span).toBeDefined();
    expect(span!.kind).toBe(SpanKind.CONSUMER);
    expect(parentOf(span!)?.spanId).toBe(first.spanId);
    expect(span!.attributes).toMatchObject({
      'messaging.system': 'aws_sqs',
      'messaging.operation.type': 'process',
      'messaging.destination.name': queueName,
      'messaging.message.id': firstId,
      'idempotency.scope': queueName,
      'idempotency.outcome': 'ACQUIRED',
      'idempotency.attempt': 1,
      'idempotency.broker_action': 'delete',
    });
    expect(Number.isSafeInteger(span!.attributes['idempotency.fencing_token'])).toBe(true);
    expect(handlerTraces).toEqual([first.traceId]);

    const [dup] = sdk.spans(name).filter((s) => s.spanContext().traceId === second.traceId);
    expect(parentOf(dup!)?.spanId).toBe(second.spanId);
    expect(dup!.attributes).toMatchObject({
      'idempotency.outcome': 'DUPLICATE',
      'idempotency.broker_action': 'delete',
    });

    expect(await sdk.counts('idempotency.outcomes', 'idempotency.outcome')).toEqual({
      ACQUIRED: 1,
      DUPLICATE: 1,
    });
    expect(await sdk.counts('idempotency.broker_actions', 'idempotency.broker_action')).toEqual({
      delete: 2,
    });
    const durations = await sdk.metric('idempotency.handler.duration');
    expect(durations.map((p) => (p.value as { count: number }).count)).toEqual([1]);
    expect((await sdk.metric('idempotency.in_flight')).map((p) => p.value)).toEqual([0]);
  });

  it('a message stop() abandons counts once as broker action leave, as its settled event says, and nothing after its handler returns', async () => {
    const q = await fx.queue('tel-abandoned');
    const idempotency = fx.idempotency({ leaseMs: 3000 });
    const settled: string[] = [];
    let started = false;
    let release = () => {};
    poller = new IdempotentSqsPoller(
      { idempotency, sqs: fx.sqs },
      {
        queueUrl: q.url,
        concurrency: 1,
        waitTimeSeconds: 1,
        stopTimeoutMs: 200,
        telemetry: { tracerProvider: sdk.tracerProvider, meterProvider: sdk.meterProvider },
      },
      async () => {
        started = true;
        await new Promise<void>((resolve) => (release = resolve));
        return 'late';
      },
    );
    poller.on('settled', (e) => settled.push(`${e.decision.action}:${e.decision.reason}`));
    poller.start();
    await send(q.url, 'tel-abandoned', producedTrace());
    await waitFor('the handler to run', () => started);

    expect(await poller.stop()).toEqual({ abandoned: 1 });
    poller = undefined;

    expect(settled).toEqual(['leave:abandoned']);
    expect(await sdk.counts('idempotency.broker_actions', 'idempotency.broker_action')).toEqual({ leave: 1 });
    const completed = new Promise((resolve) => idempotency.once('completed', resolve));
    release();
    await completed;
    const name = `process ${q.url.slice(q.url.lastIndexOf('/') + 1)}`;
    await waitFor('its span to end', () => sdk.spans(name).length === 1);
    expect(sdk.spans(name)[0]!.attributes['idempotency.broker_action']).toBe('leave');
    expect(await sdk.counts('idempotency.broker_actions', 'idempotency.broker_action')).toEqual({ leave: 1 });
    expect(settled).toEqual(['leave:abandoned']);
  });
});
