import { join } from 'node:path';
import { type GroupMember, startMember, uniqueName } from '../../support/kafka-fixture';
import { waitFor } from '../../support/net';
import { describeWithServices } from '../../support/service';
import { startWorker } from '../../support/worker-process';
import { eachMessageOf, redisRunner, useKafkaSuite } from './kafka-suite';
import { payments } from './payments';

const WORKER = join(__dirname, '../../workers/kafka-consumer.ts');

describeWithServices(
  ['redis', 'kafka'],
  'kafka: a consumer killed after completing, before committing',
  ({ redis: redisUrl, kafka: brokers }) => {
    const suite = useKafkaSuite(brokers, redisUrl);

    it('replays its messages as DUPLICATEs to the next consumer of the group', async () => {
      const { redis, kafka } = suite;
      const topic = uniqueName('kill');
      const groupId = uniqueName('g');
      const prefix = uniqueName('idem');
      const ledger = uniqueName('ledger');
      const total = 20;
      let consumer: GroupMember | undefined;
      try {
        await suite.producer.send({ topic, messages: payments(total) });
        const worker = startWorker(WORKER, {
          IC_REDIS: redisUrl,
          IC_PREFIX: prefix,
          IC_BROKERS: brokers,
          IC_GROUP: groupId,
          IC_TOPIC: topic,
          IC_LEDGER: ledger,
        });
        await waitFor(
          `the worker to complete all ${total} (stderr: ${worker.stderr().slice(0, 300)})`,
          () => worker.stdout().split('completed ').length - 1 >= total,
          40_000,
        );
        worker.child.kill('SIGKILL');
        await worker.exited;

        // Nothing was committed: the group's offsets are all unset.
        const admin = kafka.admin();
        await admin.connect();
        const offsets = await admin.fetchOffsets({ groupId, topics: [topic] });
        await admin.disconnect();
        expect(offsets[0]!.partitions.map((p) => p.offset)).toEqual(['-1', '-1', '-1', '-1']);
        expect(Object.values(await redis.hgetall(ledger)).map(Number)).toEqual(Array(total).fill(1));

        // The next member of the group gets every message again: each is a DUPLICATE, nothing runs.
        const idempotency = redisRunner(redis, { leaseMs: 3000 }, { keyPrefix: prefix });
        const outcomes: string[] = [];
        idempotency.on('outcome', ({ outcome }) => outcomes.push(outcome));
        let runs = 0;
        // The dead worker is still a member until its session times out; the mock may stop a joiner then
        // (MOCK_SYNC_GROUP_LIMIT), and a new consumer takes its place.
        consumer = await startMember(
          kafka,
          groupId,
          topic,
          eachMessageOf(idempotency, groupId, () => {
            runs++;
          }),
          {},
          { what: 'kafka kill' },
        );
        await waitFor('every replayed message', () => outcomes.length >= total, 30_000);
        expect(outcomes).toEqual(Array(total).fill('DUPLICATE'));
        expect(runs).toBe(0);
        expect(consumer.crashes()).toEqual([]);
        expect(Object.values(await redis.hgetall(ledger)).map(Number)).toEqual(Array(total).fill(1));
      } finally {
        await consumer?.stop();
        await redis.del(ledger);
      }
    }, 90_000);
  },
);
