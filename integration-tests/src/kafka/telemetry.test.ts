import { idempotentEachBatch, idempotentEachMessage } from '@idempotent-consumer/kafka';
import { SpanKind } from '@opentelemetry/api';
import Redis from 'ioredis';
import type { Consumer } from 'kafkajs';
import { uniqueName } from '../../support/kafka-fixture';
import { waitFor } from '../../support/net';
import { RedisServer } from '../../support/redis-server';
import { describeWithServices } from '../../support/service';
import { parentOf, producedTrace, TelemetrySdk } from '../../support/telemetry';
import { redisRunner, useKafkaSuite } from './kafka-suite';

/**
 * The one message of `topic` was paused once, then resolved: one `pause` and one `resolve` on its spans and
 * in `idempotency.broker_actions`.
 */
async function expectPausedOnceThenResolved(sdk: TelemetrySdk, topic: string): Promise<void> {
  expect(
    sdk
      .spans(`process ${topic}`)
      .map((s) => s.attributes['idempotency.broker_action'])
      .sort(),
  ).toEqual(['pause', 'resolve']);
  expect(await sdk.counts('idempotency.broker_actions', 'idempotency.broker_action')).toEqual({
    pause: 1,
    resolve: 1,
  });
}

describeWithServices(
  ['redis', 'kafka'],
  'kafka eachMessage: OpenTelemetry',
  ({ redis: redisUrl, kafka: brokers }) => {
    jest.setTimeout(60_000);
    const suite = useKafkaSuite(brokers, redisUrl, {});
    let sdk: TelemetrySdk;
    beforeEach(() => {
      sdk = new TelemetrySdk();
    });
    afterEach(() => sdk.close());

    it('a span per message continues the producer trace (Buffer headers); the duplicate is DUPLICATE; metrics count outcomes', async () => {
      const topic = uniqueName('tel');
      const groupId = uniqueName('g');
      const idempotency = redisRunner(suite.redis, { leaseMs: 3000 });
      const first = producedTrace();
      const second = producedTrace();
      // One partition key: both land in one partition, in order, so the second meets the first's record.
      await suite.producer.send({
        topic,
        messages: [
          {
            key: 'p',
            value: 'a',
            headers: {
              'idempotency-key': 'tel-1',
              traceparent: first.traceparent,
              tracestate: first.tracestate,
            },
          },
          { key: 'p', value: 'a', headers: { 'idempotency-key': 'tel-1', traceparent: second.traceparent } },
        ],
      });
      const handlerTraces: (string | undefined)[] = [];
      let settled = 0;
      await suite.start(groupId, topic, (c) => {
        const eachMessage = idempotentEachMessage(
          { idempotency, consumer: c, producer: suite.producer },
          { groupId, telemetry: { tracerProvider: sdk.tracerProvider, meterProvider: sdk.meterProvider } },
          () => {
            handlerTraces.push(sdk.activeTraceId());
          },
        );
        eachMessage.events.on('settled', () => {
          settled += 1;
        });
        return { eachMessage };
      });
      await waitFor('two settled messages', () => settled === 2, 30_000);
      const name = `process ${topic}`;
      await waitFor('two spans', () => sdk.spans(name).length === 2);

      const [span] = sdk.spans(name).filter((s) => s.spanContext().traceId === first.traceId);
      expect(span).toBeDefined();
      expect(span!.kind).toBe(SpanKind.CONSUMER);
      expect(parentOf(span!)?.spanId).toBe(first.spanId);
      expect(span!.attributes).toMatchObject({
        'messaging.system': 'kafka',
        'messaging.operation.type': 'process',
        'messaging.destination.name': topic,
        'messaging.consumer.group.name': groupId,
        'idempotency.scope': `${groupId}/${topic}`,
        'idempotency.outcome': 'ACQUIRED',
        'idempotency.attempt': 1,
        'idempotency.broker_action': 'resolve',
      });
      expect(typeof span!.attributes['messaging.destination.partition.id']).toBe('string');
      expect(typeof span!.attributes['messaging.kafka.offset']).toBe('number');
      expect(Number.isSafeInteger(span!.attributes['idempotency.fencing_token'])).toBe(true);
      expect(handlerTraces).toEqual([first.traceId]);

      const [dup] = sdk.spans(name).filter((s) => s.spanContext().traceId === second.traceId);
      expect(dup!.attributes).toMatchObject({
        'idempotency.outcome': 'DUPLICATE',
        'idempotency.broker_action': 'resolve',
        'messaging.kafka.offset': (span!.attributes['messaging.kafka.offset'] as number) + 1,
      });

      expect(await sdk.counts('idempotency.outcomes', 'idempotency.outcome')).toEqual({
        ACQUIRED: 1,
        DUPLICATE: 1,
      });
      expect(await sdk.counts('idempotency.broker_actions', 'idempotency.broker_action')).toEqual({
        resolve: 2,
      });
      const durations = await sdk.metric('idempotency.handler.duration');
      expect(durations.map((p) => (p.value as { count: number }).count)).toEqual([1]);
      expect(durations[0]!.attributes).toEqual({
        'messaging.system': 'kafka',
        'messaging.destination.name': topic,
      });
    });

    it('a handler error whose backoff exceeds maxInlineDelayMs pauses the partition once: one pause in idempotency.broker_actions and on the span, then one resolve', async () => {
      const topic = uniqueName('tel-pause');
      const groupId = uniqueName('g');
      const idempotency = redisRunner(suite.redis, { leaseMs: 3000 });
      await suite.producer.send({
        topic,
        messages: [{ partition: 0, value: 'a', headers: { 'idempotency-key': 'tel-pause' } }],
      });
      let runs = 0;
      let settled = 0;
      let paused = 0;
      await suite.start(groupId, topic, (c) => {
        const consumer = {
          pause: (topics: Parameters<typeof c.pause>[0]) => {
            paused += 1;
            c.pause(topics);
          },
          resume: (topics: Parameters<typeof c.resume>[0]) => c.resume(topics),
        };
        const eachMessage = idempotentEachMessage(
          { idempotency, consumer, producer: suite.producer },
          {
            groupId,
            maxInlineDelayMs: 0,
            retryBackoff: { baseMs: 200, jitter: 'none' },
            telemetry: { tracerProvider: sdk.tracerProvider, meterProvider: sdk.meterProvider },
          },
          () => {
            runs += 1;
            if (runs === 1) throw new Error('gateway down');
          },
        );
        eachMessage.events.on('settled', () => {
          settled += 1;
        });
        return { eachMessage };
      });
      await waitFor('the message settled after its pause', () => settled === 1, 30_000);
      const name = `process ${topic}`;
      await waitFor('two spans', () => sdk.spans(name).length === 2);
      expect(paused).toBe(1);
      await expectPausedOnceThenResolved(sdk, topic);
    });
  },
);

describeWithServices(['kafka'], 'kafka: OpenTelemetry while Redis is stopped', ({ kafka: brokers }) => {
  jest.setTimeout(60_000);
  let server: RedisServer;
  beforeAll(async () => {
    server = await RedisServer.start();
  });
  afterAll(() => server.dispose());
  const suite = useKafkaSuite(brokers);
  let sdk: TelemetrySdk;
  beforeEach(() => {
    sdk = new TelemetrySdk();
  });
  afterEach(() => sdk.close());

  it.each(['eachMessage', 'eachBatch'] as const)(
    '%s: a topic paused until the store answers is one pause in idempotency.broker_actions and on a span, then one resolve',
    async (wrapper) => {
      const redis = new Redis(server.url, {
        enableOfflineQueue: false,
        maxRetriesPerRequest: 0,
        retryStrategy: () => 100,
      });
      try {
        await waitFor('redis ready', () => redis.status === 'ready', 5000);
        const topic = uniqueName('tel-outage');
        const groupId = uniqueName('g');
        const idempotency = redisRunner(redis, { leaseMs: 3000 }, { commandTimeoutMs: 300 });
        let paused = 0;
        let settled = 0;
        let unavailable = 0;
        const options = {
          groupId,
          deadLetterTopic: false as const,
          maxInlineDelayMs: 100,
          storeProbeBackoff: { baseMs: 100, maxMs: 100 },
          telemetry: { tracerProvider: sdk.tracerProvider, meterProvider: sdk.meterProvider },
        };
        await suite.start(groupId, topic, (c: Consumer) => {
          const consumer = {
            pause: (topics: Parameters<typeof c.pause>[0]) => {
              paused += 1;
              c.pause(topics);
            },
            resume: (topics: Parameters<typeof c.resume>[0]) => c.resume(topics),
          };
          const wrapped =
            wrapper === 'eachMessage'
              ? idempotentEachMessage({ idempotency, consumer }, options, () => {})
              : idempotentEachBatch({ idempotency, consumer }, options, () => {});
          wrapped.events.on('settled', () => {
            settled += 1;
          });
          wrapped.events.on('storeUnavailable', () => {
            unavailable += 1;
          });
          return wrapper === 'eachMessage'
            ? { eachMessage: wrapped as ReturnType<typeof idempotentEachMessage> }
            : { eachBatch: wrapped as ReturnType<typeof idempotentEachBatch> };
        });
        // Redis stops before the message arrives: its claim meets the outage, and the topic is paused.
        await server.stop();
        await suite.producer.send({
          topic,
          messages: [{ partition: 0, value: 'a', headers: { 'idempotency-key': 'tel-outage' } }],
        });
        await waitFor('the topic paused for the outage', () => unavailable >= 1 && paused >= 1, 30_000);
        await server.restart();
        await waitFor('the message settled after the outage', () => settled === 1, 30_000);
        expect(paused).toBe(1);
        await expectPausedOnceThenResolved(sdk, topic);
      } finally {
        await server.restart();
        redis.disconnect();
      }
    },
  );
});
