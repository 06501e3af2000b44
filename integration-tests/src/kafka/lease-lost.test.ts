import { buildRecordKey, Idempotency, RedisIdempotencyStore } from '@idempotent-consumer/core';
import { idempotentEachBatch, idempotentEachMessage } from '@idempotent-consumer/kafka';
import Redis from 'ioredis';
import type { Consumer, Kafka, Producer } from 'kafkajs';
import { connectProducer, kafkaClient, startConsumer, uniqueName } from '../../support/kafka-fixture';
import { waitFor } from '../../support/net';
import { describeWithServices } from '../../support/service';
import { type RecordedEvent, recordEvents } from './recorded-events';

describeWithServices(
  ['redis', 'kafka'],
  'kafka: a record that vanishes while its handler runs',
  ({ redis: redisUrl, kafka: brokers }) => {
    let redis: Redis;
    let kafka: Kafka;
    let producer: Producer;
    const consumers: Consumer[] = [];
    const closers: (() => void)[] = [];

    beforeAll(async () => {
      redis = new Redis(redisUrl);
      kafka = kafkaClient(brokers);
      producer = await connectProducer(kafka);
    });
    afterEach(async () => {
      await Promise.all(consumers.splice(0).map((c) => c.disconnect()));
      for (const close of closers.splice(0)) close();
    });
    afterAll(async () => {
      await producer.disconnect();
      await redis.quit();
    });

    it.each(['eachMessage', 'eachBatch'] as const)(
      '%s: the handler returned, its COMPLETED write answers LEASE_LOST: offset resolved, lease-lost event, no rerun',
      async (form) => {
        const topic = uniqueName('vanish');
        const groupId = uniqueName('g');
        const keyPrefix = uniqueName('idem');
        const store = new RedisIdempotencyStore({ redis }, { keyPrefix, commandTimeoutMs: 1000 });
        const idempotency = new Idempotency({ store }, { leaseMs: 5000, retentionMs: 600_000 });
        const runs: string[] = [];
        const events: RecordedEvent[] = [];
        const handler = async ({ key = '', scope }: { key?: string | undefined; scope: string }) => {
          runs.push(key);
          // Redis loses the record while the first run of the handler runs (a restart without persistence,
          // a failover). Only the first: a rerun would otherwise lose it again, for ever.
          if (key === 'vanishing' && runs.length === 1)
            await redis.del(buildRecordKey(keyPrefix, { scope, key }));
          return 'charged';
        };
        await producer.send({
          topic,
          messages: [
            { partition: 0, value: 'a', headers: { 'idempotency-key': 'vanishing' } },
            { partition: 0, value: 'b', headers: { 'idempotency-key': 'after' } },
          ],
        });
        const deps = (consumer: Consumer) => ({ idempotency, consumer, producer });
        const options = { groupId };
        consumers.push(
          await startConsumer(kafka, groupId, topic, (consumer) => {
            if (form === 'eachMessage') {
              const eachMessage = recordEvents(
                idempotentEachMessage(deps(consumer), options, handler),
                events,
              );
              closers.push(eachMessage.close);
              return { eachMessage };
            }
            const eachBatch = recordEvents(idempotentEachBatch(deps(consumer), options, handler), events);
            closers.push(eachBatch.close);
            return { eachBatch };
          }),
        );
        // The partition is handled in order, so once `after` ran, `vanishing` was settled for good.
        await waitFor('the message behind it to run', () => runs.includes('after'), 30_000);
        expect(runs).toEqual(['vanishing', 'after']);
        const lost = events.filter((e) => e.type === 'leaseLost');
        expect(lost).toEqual([
          expect.objectContaining({
            source: { topic, partition: 0, offset: '0' },
            key: 'vanishing',
            during: 'write',
            handlerCompleted: true,
            reason: 'record-vanished',
          }),
        ]);
        // The offset of `vanishing` resolved and is committed with the one behind it.
        const admin = kafka.admin();
        await admin.connect();
        try {
          await waitFor(
            'offset 2 committed',
            async () => {
              const [t] = await admin.fetchOffsets({ groupId, topics: [topic] });
              return t?.partitions.find((p) => p.partition === 0)?.offset === '2';
            },
            15_000,
            100,
          );
        } finally {
          await admin.disconnect();
        }
      },
      60_000,
    );
  },
);
