import { idempotentEachBatch, idempotentEachMessage, type KafkaHandler } from '@idempotent-consumer/kafka';
import Redis from 'ioredis';
import type { Consumer } from 'kafkajs';
import { uniqueName } from '../../support/kafka-fixture';
import { waitFor } from '../../support/net';
import { RedisServer } from '../../support/redis-server';
import { describeWithServices } from '../../support/service';
import { redisRunner, useKafkaSuite } from './kafka-suite';
import { type RecordedEvent, recordEvents } from './recorded-events';

/**
 * The wrappers pause partitions themselves (a backoff, or the whole topic while Redis does not answer) and
 * resume them later; an application may pause partitions of its own (`consumer.pause`, e.g. for
 * backpressure). The wrapper resumes only what it paused: a partition the application paused stays
 * paused, whenever the application paused it.
 */
describeWithServices(['kafka'], 'kafka: partitions the application paused itself', ({ kafka: brokers }) => {
  let server: RedisServer;
  beforeAll(async () => {
    server = await RedisServer.start();
  });
  afterAll(() => server.dispose());
  const suite = useKafkaSuite(brokers);

  /** A store client that fails at once while the server is down and reconnects every 100 ms. */
  async function storeClient(): Promise<Redis> {
    const redis = new Redis(server.url, {
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      retryStrategy: () => 100,
    });
    await waitFor('redis ready', () => redis.status === 'ready', 5000);
    return redis;
  }

  /** Starts a consumer of a new topic whose four partitions (the mock's) each got one message handled. */
  async function start(
    wrapper: 'eachMessage' | 'eachBatch',
    redis: Redis,
    options: Parameters<typeof idempotentEachMessage>[1],
    handler: KafkaHandler<unknown>,
  ): Promise<{ topic: string; consumer: Consumer; events: RecordedEvent[]; paused: () => number[] }> {
    const topic = uniqueName('app-pause');
    const groupId = uniqueName('g');
    const idempotency = redisRunner(redis, { leaseMs: 3000 }, { commandTimeoutMs: 300 });
    const events: RecordedEvent[] = [];
    await suite.producer.send({
      topic,
      messages: [0, 1, 2, 3].map((partition) => ({
        partition,
        value: 'w',
        headers: { 'idempotency-key': `warm-${partition}` },
      })),
    });
    const consumer = await suite.start(groupId, topic, (c) => {
      const dependencies = { idempotency, consumer: c };
      const all = { groupId, deadLetterTopic: false as const, ...options };
      return wrapper === 'eachMessage'
        ? { eachMessage: recordEvents(idempotentEachMessage(dependencies, all, handler), events) }
        : { eachBatch: recordEvents(idempotentEachBatch(dependencies, all, handler), events) };
    });
    await waitFor(
      'the four warm-up messages',
      () => events.filter((e) => e.type === 'settled').length >= 4,
      30_000,
    );
    const paused = () => consumer.paused().find((t) => t.topic === topic)?.partitions ?? [];
    return { topic, consumer, events, paused };
  }

  it.each(['eachMessage', 'eachBatch'] as const)(
    '%s: after Redis answers again, the partitions the application paused before or during the outage stay paused; the rest of the topic, and the partition it resumed meanwhile, resume',
    async (wrapper) => {
      const redis = await storeClient();
      const handled: string[] = [];
      try {
        const { topic, consumer, events, paused } = await start(
          wrapper,
          redis,
          { maxInlineDelayMs: 300, storeProbeBackoff: { baseMs: 200, maxMs: 200 } },
          ({ partition, key }) => {
            handled.push(`${partition}:${key}`);
          },
        );
        consumer.pause([{ topic, partitions: [1, 3] }]); // before the outage
        expect(paused()).toEqual([1, 3]);
        await server.stop();
        await suite.producer.send({
          topic,
          messages: [{ partition: 0, value: 'x', headers: { 'idempotency-key': 'during-0' } }],
        });
        await waitFor(
          'the topic paused until Redis answers',
          () => events.some((e) => e.type === 'storeUnavailable') && paused().length === 4,
          20_000,
        );
        consumer.pause([{ topic, partitions: [2] }]); // during the outage
        consumer.resume([{ topic, partitions: [3] }]);
        // The topic stays paused while Redis does not answer: nothing of it is fetched to fail again.
        expect(paused()).toEqual([0, 1, 2, 3]);
        await server.restart();
        await waitFor('storeRecovered', () => events.some((e) => e.type === 'storeRecovered'), 20_000);
        expect(paused()).toEqual([1, 2]);
        await waitFor('the message the outage held', () => handled.includes('0:during-0'), 20_000);
        await suite.producer.send({
          topic,
          messages: [1, 2, 3].map((partition) => ({
            partition,
            value: 'y',
            headers: { 'idempotency-key': `after-${partition}` },
          })),
        });
        await waitFor('the partition resumed during the outage', () => handled.includes('3:after-3'), 20_000);
        expect(paused()).toEqual([1, 2]);
        expect(handled.filter((h) => h.startsWith('1:') || h.startsWith('2:')).sort()).toEqual([
          '1:warm-1',
          '2:warm-2',
        ]);
      } finally {
        await server.restart();
        redis.disconnect();
      }
    },
    90_000,
  );

  it.each(['eachMessage', 'eachBatch'] as const)(
    '%s: a partition the application paused before or during a backoff pause stays paused when the backoff ends',
    async (wrapper) => {
      const redis = await storeClient();
      const runs: string[] = [];
      let consumer: Consumer | undefined;
      let topic = '';
      try {
        const started = await start(
          wrapper,
          redis,
          { maxInlineDelayMs: 0, retryBackoff: { baseMs: 800, maxMs: 800, jitter: 'none' } },
          ({ partition, key, attempt }) => {
            runs.push(`${partition}:${key}:${attempt}`);
            if (key === 'a' && attempt === 1) consumer!.pause([{ topic, partitions: [0] }]); // before
            if (['a', 'b', 'c'].includes(key ?? '') && attempt === 1) throw new Error(`${key} fails once`);
          },
        );
        ({ consumer, topic } = started);
        const { events, paused } = started;
        const backoffOf = (key: string) =>
          events.some((e) => e.type === 'retryScheduled' && e.key === key && e.paused);
        await suite.producer.send({
          topic,
          messages: [
            { partition: 0, value: 'a', headers: { 'idempotency-key': 'a' } },
            { partition: 2, value: 'c', headers: { 'idempotency-key': 'c' } },
          ],
        });
        await waitFor(
          'a and c paused for their backoff',
          () => backoffOf('a') && backoffOf('c') && paused().includes(0) && paused().includes(2),
          20_000,
        );
        consumer.pause([{ topic, partitions: [2] }]); // during c's backoff
        // b's backoff pause starts after those of a and c, for as long: it ends after theirs.
        await suite.producer.send({
          topic,
          messages: [{ partition: 1, value: 'b', headers: { 'idempotency-key': 'b' } }],
        });
        await waitFor('b run again after its backoff', () => runs.includes('1:b:2'), 20_000);
        expect(paused()).toEqual([0, 2]);
        expect(runs.filter((r) => r.startsWith('0:a') || r.startsWith('2:c')).sort()).toEqual([
          '0:a:1',
          '2:c:1',
        ]);
      } finally {
        redis.disconnect();
      }
    },
    90_000,
  );
});
