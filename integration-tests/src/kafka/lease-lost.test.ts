import { buildRecordKey } from '@idempotent-consumer/core';
import { idempotentEachBatch, idempotentEachMessage } from '@idempotent-consumer/kafka';
import type { Consumer } from 'kafkajs';
import { uniqueName, waitForCommitted } from '../../support/kafka-fixture';
import { waitFor } from '../../support/net';
import { describeWithServices } from '../../support/service';
import { redisRunner, useKafkaSuite } from './kafka-suite';
import { type RecordedEvent, recordEvents } from './recorded-events';

describeWithServices(
  ['redis', 'kafka'],
  'kafka: a record that vanishes while its handler runs',
  ({ redis: redisUrl, kafka: brokers }) => {
    const suite = useKafkaSuite(brokers, redisUrl, {});

    it.each(['eachMessage', 'eachBatch'] as const)(
      '%s: the handler returned, its COMPLETED write answers LEASE_LOST: offset resolved, lease-lost event, no rerun',
      async (form) => {
        const topic = uniqueName('vanish');
        const groupId = uniqueName('g');
        const keyPrefix = uniqueName('idem');
        const idempotency = redisRunner(
          suite.redis,
          { leaseMs: 5000 },
          { keyPrefix, commandTimeoutMs: 1000 },
        );
        const runs: string[] = [];
        const events: RecordedEvent[] = [];
        const handler = async ({ key = '', scope }: { key?: string | undefined; scope: string }) => {
          runs.push(key);
          // Redis loses the record while the first run of the handler runs (a restart without persistence,
          // a failover). Only the first: a rerun would otherwise lose it again, for ever.
          if (key === 'vanishing' && runs.length === 1)
            await suite.redis.del(buildRecordKey(keyPrefix, { scope, key }));
          return 'charged';
        };
        await suite.producer.send({
          topic,
          messages: [
            { partition: 0, value: 'a', headers: { 'idempotency-key': 'vanishing' } },
            { partition: 0, value: 'b', headers: { 'idempotency-key': 'after' } },
          ],
        });
        const deps = (consumer: Consumer) => ({ idempotency, consumer, producer: suite.producer });
        const options = { groupId };
        await suite.start(groupId, topic, (consumer) =>
          form === 'eachMessage'
            ? { eachMessage: recordEvents(idempotentEachMessage(deps(consumer), options, handler), events) }
            : { eachBatch: recordEvents(idempotentEachBatch(deps(consumer), options, handler), events) },
        );
        // The partition is handled in order, so once `after` ran, `vanishing`'s handler ran for good. Its
        // completion may still be settling: eachBatch starts the next message while the previous one's
        // completion is written (one completion in flight), so its event is awaited, not assumed.
        await waitFor('the message behind it to run', () => runs.includes('after'), 30_000);
        await waitFor('the lease-lost event', () => events.some((e) => e.type === 'leaseLost'), 30_000);
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
        await waitForCommitted(suite.kafka, groupId, topic, 0, '2');
      },
      60_000,
    );
  },
);
