import {
  type IdempotentEachBatch,
  type IdempotentEachMessage,
  idempotentEachBatch,
  idempotentEachMessage,
} from '@idempotent-consumer/kafka';
import { SpanKind } from '@opentelemetry/api';
import Redis from 'ioredis';
import type { Consumer } from 'kafkajs';
import { uniqueName } from '../../support/kafka-fixture';
import { waitFor } from '../../support/net';
import { RedisServer } from '../../support/redis-server';
import { describeWithServices } from '../../support/service';
import { parentOf, producedTrace, TelemetrySdk } from '../../support/telemetry';
import { redisRunner, useKafkaSuite, type WrappedHandler } from './kafka-suite';

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

/** `c` as the wrappers' `consumer`, counting its `pause` calls (`paused()`). */
function countingPauses(c: Consumer): {
  consumer: Pick<Consumer, 'pause' | 'resume'>;
  paused: () => number;
} {
  let paused = 0;
  const consumer = {
    pause: (topics: Parameters<typeof c.pause>[0]) => {
      paused += 1;
      c.pause(topics);
    },
    resume: (topics: Parameters<typeof c.resume>[0]) => c.resume(topics),
  };
  return { consumer, paused: () => paused };
}

/**
 * `handler` wrapped by the wrapper named on `idempotency`, with `c` as its consumer, as `run` returns it to
 * `suite.start`; counts the wrapper's `settled` events and the consumer's pauses into `counts`.
 */
function wrapCounting(
  wrapper: 'eachMessage' | 'eachBatch',
  c: Consumer,
  idempotency: Parameters<typeof idempotentEachMessage>[0]['idempotency'],
  options: Parameters<typeof idempotentEachMessage>[1],
  handler: () => void,
  counts: { settled: number; paused: () => number },
): { wrapped: IdempotentEachMessage | IdempotentEachBatch; run: WrappedHandler } {
  const { consumer, paused } = countingPauses(c);
  counts.paused = paused;
  const dependencies = { idempotency, consumer };
  const wrapped =
    wrapper === 'eachMessage'
      ? idempotentEachMessage(dependencies, options, handler)
      : idempotentEachBatch(dependencies, options, handler);
  wrapped.events.on('settled', () => {
    counts.settled += 1;
  });
  return {
    wrapped,
    run:
      wrapper === 'eachMessage'
        ? { eachMessage: wrapped as IdempotentEachMessage }
        : { eachBatch: wrapped as IdempotentEachBatch },
  };
}

describeWithServices(
  ['redis', 'kafka'],
  'kafka eachMessage and eachBatch: OpenTelemetry',
  ({ redis: redisUrl, kafka: brokers }) => {
    jest.setTimeout(60_000);
    const suite = useKafkaSuite(brokers, redisUrl, {});
    let sdk: TelemetrySdk;
    beforeEach(() => {
      sdk = new TelemetrySdk();
    });
    afterEach(() => sdk.close());

    /** A fresh topic with one message on partition 0 (key `what`), a group id, and a runner. */
    async function oneMessage(what: string) {
      const topic = uniqueName(what);
      const groupId = uniqueName('g');
      const idempotency = redisRunner(suite.redis, { leaseMs: 3000 });
      await suite.producer.send({
        topic,
        messages: [{ partition: 0, value: 'a', headers: { 'idempotency-key': what } }],
      });
      return { topic, groupId, idempotency };
    }

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
      const { topic, groupId, idempotency } = await oneMessage('tel-pause');
      let runs = 0;
      let settled = 0;
      let paused = () => 0;
      await suite.start(groupId, topic, (c) => {
        const counting = countingPauses(c);
        const { consumer } = counting;
        paused = counting.paused;
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
      expect(paused()).toBe(1);
      await expectPausedOnceThenResolved(sdk, topic);
    });

    it.each(['eachMessage', 'eachBatch'] as const)(
      '%s: a `scope` function that throws (a TypeError) once pauses the partition, one pause in idempotency.broker_actions and on a span, then one resolve; the consumer keeps running',
      async (wrapper) => {
        const { topic, groupId, idempotency } = await oneMessage('tel-scope');
        let scopeCalls = 0;
        const counts = { settled: 0, paused: () => 0 };
        let runs = 0;
        const storeErrors: string[] = [];
        const crashes: string[] = [];
        const options = {
          groupId,
          deadLetterTopic: false as const,
          retryBackoff: { baseMs: 200, jitter: 'none' as const },
          // Throws the first time, as a scope table missing a topic would until it is loaded.
          scope: (t: string) => {
            scopeCalls += 1;
            if (scopeCalls === 1) throw new TypeError(`no scope for ${t} yet`);
            return `${groupId}/${t}`;
          },
          telemetry: { tracerProvider: sdk.tracerProvider, meterProvider: sdk.meterProvider },
        };
        await suite.start(groupId, topic, (c: Consumer) => {
          c.on(c.events.CRASH, ({ payload }) => {
            crashes.push(`${payload.error?.name}: ${payload.error?.message} (restart ${payload.restart})`);
          });
          const { wrapped, run } = wrapCounting(
            wrapper,
            c,
            idempotency,
            options,
            () => {
              runs += 1;
            },
            counts,
          );
          wrapped.events.on('storeError', (e) => storeErrors.push(e.operation));
          return run;
        });
        await waitFor(
          'the message settled after its pause',
          () => {
            if (crashes.length > 0) throw new Error(`the consumer crashed: ${crashes.join('; ')}`);
            return counts.settled === 1;
          },
          30_000,
        );
        const name = `process ${topic}`;
        await waitFor('two spans', () => sdk.spans(name).length === 2);
        expect({ paused: counts.paused(), runs, storeErrors, crashes }).toEqual({
          paused: 1,
          runs: 1,
          storeErrors: ['process'],
          crashes: [],
        });
        await expectPausedOnceThenResolved(sdk, topic);
      },
    );
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
        const counts = { settled: 0, paused: () => 0 };
        let unavailable = 0;
        const options = {
          groupId,
          deadLetterTopic: false as const,
          maxInlineDelayMs: 100,
          storeProbeBackoff: { baseMs: 100, maxMs: 100 },
          telemetry: { tracerProvider: sdk.tracerProvider, meterProvider: sdk.meterProvider },
        };
        await suite.start(groupId, topic, (c: Consumer) => {
          const { wrapped, run } = wrapCounting(wrapper, c, idempotency, options, () => {}, counts);
          wrapped.events.on('storeUnavailable', () => {
            unavailable += 1;
          });
          return run;
        });
        // Redis stops before the message arrives: its claim meets the outage, and the topic is paused.
        await server.stop();
        await suite.producer.send({
          topic,
          messages: [{ partition: 0, value: 'a', headers: { 'idempotency-key': 'tel-outage' } }],
        });
        await waitFor(
          'the topic paused for the outage',
          () => unavailable >= 1 && counts.paused() >= 1,
          30_000,
        );
        await server.restart();
        await waitFor('the message settled after the outage', () => counts.settled === 1, 30_000);
        expect(counts.paused()).toBe(1);
        await expectPausedOnceThenResolved(sdk, topic);
      } finally {
        await server.restart();
        redis.disconnect();
      }
    },
  );
});
