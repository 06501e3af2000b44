import { setTimeout as sleep } from 'node:timers/promises';
import { idempotentEachBatch, idempotentEachMessage } from '@idempotent-consumer/kafka';
import { type GroupMember, startMember, uniqueName } from '../../support/kafka-fixture';
import { waitFor } from '../../support/net';
import { describeWithServices } from '../../support/service';
import { redisRunner, useKafkaSuite } from './kafka-suite';
import { producePaymentsSlowly } from './payments';

describeWithServices(
  ['redis', 'kafka'],
  'kafka: a group that rebalances mid-run',
  ({ redis: redisUrl, kafka: brokers }) => {
    const suite = useKafkaSuite(brokers, redisUrl);

    it('two consumers, a third joining mid-run: no side effect twice, none lost', async () => {
      const { kafka } = suite;
      const topic = uniqueName('rebalance');
      const groupId = uniqueName('g');
      const idempotency = redisRunner(suite.redis, { leaseMs: 2000 });
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
      const members = new Map<string, GroupMember>();
      let producing: Promise<void> | undefined;
      try {
        // Commit rarely, so a rebalance hands uncommitted (already charged) messages to another member.
        // A member the mock stops at a SyncGroup (MOCK_SYNC_GROUP_LIMIT) is replaced by a new consumer.
        const extra = { autoCommitInterval: 2000 };
        const options = { groupId, deadLetterTopic: false } as const;
        for (const who of ['a', 'b']) {
          members.set(
            who,
            await startMember(
              kafka,
              groupId,
              topic,
              (c) => ({
                eachMessage: idempotentEachMessage({ idempotency, consumer: c }, options, charge(who)),
              }),
              extra,
              { what: 'kafka rebalance' },
            ),
          );
        }
        producing = producePaymentsSlowly(suite.producer, topic, total, 15);
        await waitFor('a third of the payments', () => charges.size >= total / 3, 30_000);
        const joinsBefore = [...members.values()].map((m) => m.joins());
        members.set(
          'c',
          await startMember(
            kafka,
            groupId,
            topic,
            (c) => ({ eachBatch: idempotentEachBatch({ idempotency, consumer: c }, options, charge('c')) }),
            extra,
            { what: 'kafka rebalance' },
          ),
        );
        // The join is a real rebalance: a and b joined the new generation too (a member the mock stopped
        // joins it as its replacement; one that silently stopped would leave its partitions to the others and
        // the test would pass by accident).
        await waitFor('a and b to rejoin', () =>
          joinsBefore.every((n, i) => [...members.values()][i]!.joins() > n),
        );
        await producing;
        await waitFor(`all ${total} payments`, () => charges.size >= total, 45_000);
        await sleep(500); // a late second charge would show up here
        expect(charges.size).toBe(total);
        expect([...charges.entries()].filter(([, n]) => n !== 1)).toEqual([]);
        expect(byConsumer.get('c') ?? 0).toBeGreaterThan(0); // the third member took partitions over
        expect([...members.values()].flatMap((m) => m.crashes())).toEqual([]);
      } finally {
        await producing?.catch(() => {});
        await Promise.all([...members.values()].map((m) => m.stop()));
      }
      process.stderr.write(
        `[kafka rebalance] outcomes ${JSON.stringify(Object.fromEntries(outcomes))} by consumer ${JSON.stringify(Object.fromEntries(byConsumer))}\n`,
      );
    }, 120_000);
  },
);
