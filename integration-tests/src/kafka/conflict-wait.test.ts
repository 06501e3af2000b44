import { Idempotency, RedisIdempotencyStore } from '@idempotent-consumer/core';
import { idempotentEachMessage } from '@idempotent-consumer/kafka';
import Redis from 'ioredis';
import type { Consumer } from 'kafkajs';
import { connectProducer, kafkaClient, startConsumer, uniqueName } from '../../support/kafka-fixture';
import { waitFor } from '../../support/net';
import { describeWithServices } from '../../support/service';

describeWithServices(
  ['redis', 'kafka'],
  'kafka: a duplicate delivered while the original runs',
  ({ redis: redisUrl, kafka: brokers }) => {
    it('50 payments each delivered twice at once, handler 20 ms, lease 30 s: all 100 settled in under 3 s, each charged once', async () => {
      const redis = new Redis(redisUrl, { enableAutoPipelining: true });
      const kafka = kafkaClient(brokers);
      const producer = await connectProducer(kafka);
      const topic = uniqueName('conflict-wait');
      const groupId = uniqueName('g');
      const store = new RedisIdempotencyStore({ redis }, { keyPrefix: uniqueName('idem') });
      const idempotency = new Idempotency({ store }, { leaseMs: 30_000, retentionMs: 600_000 });
      let settled = 0;
      idempotency.on('outcome', ({ outcome }) => {
        if (outcome === 'DUPLICATE') settled++;
      });
      idempotency.on('completed', () => settled++);
      const charges = new Map<string, number>();
      let consumer: Consumer | undefined;
      try {
        // Each payment's two copies go to partitions 0 and 1 (or 2 and 3), consumed concurrently, so the
        // second copy meets the first one running.
        const messages = Array.from({ length: 50 }, (_, i) =>
          [0, 1].map((copy) => ({
            partition: (i % 2) * 2 + copy,
            value: `pay-${i}`,
            headers: { 'idempotency-key': `pay-${i}` },
          })),
        ).flat();
        await producer.send({ topic, messages });
        let started = 0;
        consumer = await startConsumer(
          kafka,
          groupId,
          topic,
          (c) => ({
            eachMessage: idempotentEachMessage(
              { idempotency, consumer: c },
              { groupId, deadLetterTopic: false },
              async ({ key = '' }) => {
                started ||= performance.now();
                await new Promise((r) => setTimeout(r, 20));
                charges.set(key, (charges.get(key) ?? 0) + 1);
              },
            ),
          }),
          { partitionsConsumedConcurrently: 4 },
        );
        await waitFor('all 100 deliveries settled', () => settled >= 100, 60_000, 10);
        const elapsedMs = performance.now() - started;
        process.stderr.write(`[kafka conflict wait] 100 deliveries settled in ${elapsedMs.toFixed(0)} ms\n`);
        expect(elapsedMs).toBeLessThan(3000);
        expect(charges.size).toBe(50);
        expect([...charges.values()].filter((n) => n !== 1)).toEqual([]);
      } finally {
        await consumer?.disconnect();
        await producer.disconnect();
        await redis.quit();
      }
    }, 90_000);
  },
);
