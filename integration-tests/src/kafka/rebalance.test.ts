import { setTimeout as sleep } from 'node:timers/promises';
import { Idempotency, RedisIdempotencyStore } from '@idempotent-consumer/core';
import { idempotentEachBatch, idempotentEachMessage } from '@idempotent-consumer/kafka';
import Redis from 'ioredis';
import type { Consumer } from 'kafkajs';
import {
  connectProducer,
  joinDespiteMock,
  kafkaClient,
  startConsumer,
  uniqueName,
  watchGroup,
} from '../../support/kafka-fixture';
import { waitFor } from '../../support/net';
import { describeWithServices } from '../../support/service';

describeWithServices(
  ['redis', 'kafka'],
  'kafka: a group that rebalances mid-run',
  ({ redis: redisUrl, kafka: brokers }) => {
    it('two consumers, a third joining mid-run: no side effect twice, none lost', async () => {
      const redis = new Redis(redisUrl, { enableAutoPipelining: true });
      const kafka = kafkaClient(brokers);
      const producer = await connectProducer(kafka);
      const topic = uniqueName('rebalance');
      const groupId = uniqueName('g');
      const store = new RedisIdempotencyStore({ redis }, { keyPrefix: uniqueName('idem') });
      const idempotency = new Idempotency({ store }, { leaseMs: 2000, retentionMs: 600_000 });
      const outcomes = new Map<string, number>();
      idempotency.on('outcome', ({ outcome }) => outcomes.set(outcome, (outcomes.get(outcome) ?? 0) + 1));
      const charges = new Map<string, number>();
      const byConsumer = new Map<string, number>();
      const charge =
        (who: string) =>
        async ({ key = '' }: { key?: string | undefined }) => {
          await sleep(5); // the payment gateway
          charges.set(key, (charges.get(key) ?? 0) + 1);
          byConsumer.set(who, (byConsumer.get(who) ?? 0) + 1);
        };
      const total = 240;
      const consumers: Consumer[] = [];
      let producing: Promise<void> | undefined;
      try {
        // Commit rarely, so a rebalance hands uncommitted (already charged) messages to another member.
        const extra = { autoCommitInterval: 2000 };
        const options = { groupId, deadLetterTopic: false } as const;
        const groups = new Map<string, ReturnType<typeof watchGroup>>();
        for (const who of ['a', 'b']) {
          consumers.push(
            await startConsumer(
              kafka,
              groupId,
              topic,
              (c) => {
                groups.set(who, watchGroup(c));
                return {
                  eachMessage: idempotentEachMessage({ idempotency, consumer: c }, options, charge(who)),
                };
              },
              extra,
            ),
          );
        }
        producing = (async () => {
          for (let i = 0; i < total; i++) {
            await producer.send({
              topic,
              messages: [{ value: `p${i}`, headers: { 'idempotency-key': `pay-${i}` } }],
            });
            await sleep(15);
          }
        })();
        await waitFor('a third of the payments', () => charges.size >= total / 3, 30_000);
        const joinsBefore = [...groups.values()].map((g) => g.joins());
        consumers.push(
          await joinDespiteMock('kafka rebalance', () =>
            startConsumer(
              kafka,
              groupId,
              topic,
              (c) => ({ eachBatch: idempotentEachBatch({ idempotency, consumer: c }, options, charge('c')) }),
              extra,
            ),
          ),
        );
        // The join is a real rebalance: a and b joined the new generation too, and neither stopped (a member
        // the mock stopped would leave its partitions to the others and the test would pass by accident).
        await waitFor('a and b to rejoin', () =>
          [...groups.values()].every((g, i) => g.joins() > joinsBefore[i]!),
        );
        await producing;
        await waitFor(`all ${total} payments`, () => charges.size >= total, 45_000);
        await sleep(500); // a late second charge would show up here
        expect(charges.size).toBe(total);
        expect([...charges.entries()].filter(([, n]) => n !== 1)).toEqual([]);
        expect(byConsumer.get('c') ?? 0).toBeGreaterThan(0); // the third member took partitions over
        expect([...groups.values()].map((g) => g.crashes())).toEqual([[], []]);
      } finally {
        await producing?.catch(() => {});
        await Promise.all(consumers.map((c) => c.disconnect()));
        await producer.disconnect();
        await redis.quit();
      }
      process.stderr.write(
        `[kafka rebalance] outcomes ${JSON.stringify(Object.fromEntries(outcomes))} by consumer ${JSON.stringify(Object.fromEntries(byConsumer))}\n`,
      );
    }, 120_000);
  },
);
