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

    type Where = 'write' | 'heartbeat';
    it.each([
      ['eachMessage', 'write'],
      ['eachBatch', 'write'],
      ['eachMessage', 'heartbeat'],
      ['eachBatch', 'heartbeat'],
    ] as const)(
      "%s: leaseLost says where the claim was lost, during '%s' (a handler that threw whose release is refused: the write; a refused heartbeat while the handler ran, which then returned: the heartbeat)",
      async (form, where: Where) => {
        const topic = uniqueName(`lost-${where}`);
        const groupId = uniqueName('g');
        const keyPrefix = uniqueName('idem');
        // 'write': a lease far longer than the test, so no heartbeat is due while the handler runs and only
        // the release after it meets the loss. 'heartbeat': the first heartbeat comes about 100 ms in.
        const idempotency = redisRunner(
          suite.redis,
          { leaseMs: where === 'write' ? 60_000 : 300 },
          { keyPrefix, commandTimeoutMs: 1000 },
        );
        const runs: string[] = [];
        const events: RecordedEvent[] = [];
        const handler = async ({
          key = '',
          scope,
          signal,
        }: {
          key?: string | undefined;
          scope: string;
          signal: AbortSignal;
        }) => {
          runs.push(key);
          if (runs.length > 1) return 'charged';
          // Redis loses the record while the first run goes on (a restart without persistence, a failover).
          await suite.redis.del(buildRecordKey(keyPrefix, { scope, key }));
          if (where === 'write') throw new Error('the charge failed, retry it');
          // The next heartbeat is refused: the runner aborts the handler's signal; the handler returns.
          await new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }));
          return 'charged anyway';
        };
        await suite.producer.send({
          topic,
          messages: [{ partition: 0, value: 'a', headers: { 'idempotency-key': 'lost' } }],
        });
        const deps = (consumer: Consumer) => ({ idempotency, consumer, producer: suite.producer });
        const options = { groupId, deadLetterTopic: false } as const;
        await suite.start(groupId, topic, (consumer) =>
          form === 'eachMessage'
            ? { eachMessage: recordEvents(idempotentEachMessage(deps(consumer), options, handler), events) }
            : { eachBatch: recordEvents(idempotentEachBatch(deps(consumer), options, handler), events) },
        );
        await waitFor('the lease-lost event', () => events.some((e) => e.type === 'leaseLost'), 30_000);
        // A handler that threw is claimed again at once and completes; one that returned is not run again.
        await waitFor('the message settled', () => events.some((e) => e.type === 'settled'), 30_000);
        expect(events.filter((e) => e.type === 'leaseLost')).toEqual([
          expect.objectContaining({
            key: 'lost',
            during: where,
            handlerCompleted: where === 'heartbeat',
            reason: 'record-vanished',
          }),
        ]);
        expect(runs).toEqual(where === 'write' ? ['lost', 'lost'] : ['lost']);
      },
      60_000,
    );
  },
);
