import { uniqueName } from '../../support/kafka-fixture';
import { waitFor } from '../../support/net';
import { describeWithServices } from '../../support/service';
import { countSettled, eachMessageOf, redisRunner, useKafkaSuite } from './kafka-suite';

describeWithServices(
  ['redis', 'kafka'],
  'kafka: a duplicate delivered while the original runs',
  ({ redis: redisUrl, kafka: brokers }) => {
    const suite = useKafkaSuite(brokers, redisUrl);

    it('50 payments each delivered twice at once, handler 20 ms, lease 30 s: all 100 settled in under 3 s, each charged once', async () => {
      const topic = uniqueName('conflict-wait');
      const groupId = uniqueName('g');
      const idempotency = redisRunner(suite.redis, { leaseMs: 30_000 });
      const settled = countSettled(idempotency);
      const charges = new Map<string, number>();
      // Each payment's two copies go to partitions 0 and 1 (or 2 and 3), consumed concurrently, so the
      // second copy meets the first one running.
      const messages = Array.from({ length: 50 }, (_, i) =>
        [0, 1].map((copy) => ({
          partition: (i % 2) * 2 + copy,
          value: `pay-${i}`,
          headers: { 'idempotency-key': `pay-${i}` },
        })),
      ).flat();
      await suite.producer.send({ topic, messages });
      let started = 0;
      await suite.start(
        groupId,
        topic,
        eachMessageOf(idempotency, groupId, async ({ key = '' }) => {
          started ||= performance.now();
          await new Promise((r) => setTimeout(r, 20));
          charges.set(key, (charges.get(key) ?? 0) + 1);
        }),
        { partitionsConsumedConcurrently: 4 },
      );
      await waitFor('all 100 deliveries settled', () => settled() >= 100, 60_000, 10);
      const elapsedMs = performance.now() - started;
      process.stderr.write(`[kafka conflict wait] 100 deliveries settled in ${elapsedMs.toFixed(0)} ms\n`);
      expect(elapsedMs).toBeLessThan(3000);
      expect(charges.size).toBe(50);
      expect([...charges.values()].filter((n) => n !== 1)).toEqual([]);
    }, 90_000);
  },
);
