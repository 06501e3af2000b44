import { type Idempotency, UnreadableResultError } from '@idempotent-consumer/core';
import { idempotentEachBatch, idempotentEachMessage } from '@idempotent-consumer/kafka';
import type { Consumer } from 'kafkajs';
import { startConsumer, uniqueName, waitForCommitted } from '../../support/kafka-fixture';
import { waitFor } from '../../support/net';
import { describeWithServices } from '../../support/service';
import { redisRunner, useKafkaSuite } from './kafka-suite';
import { type RecordedEvent, recordEvents } from './recorded-events';

/**
 * `key` COMPLETED in Redis with a stored result in an encoding this version does not know (prefix `x`: a
 * newer version's, met during a rolling upgrade; runner/result-codec.ts knows `j` and `z`).
 */
async function completedUnreadable(idempotency: Idempotency, scope: string, key: string): Promise<void> {
  const id = { scope, key };
  const claim = await idempotency.claim(id);
  if (claim.outcome !== 'ACQUIRED') throw new Error(`claim of ${key}: ${claim.outcome}`);
  const written = await idempotency.store.complete(id, claim.fencingToken, {
    retentionMs: 600_000,
    result: 'x{"v":2}',
  });
  if (!written.ok) throw new Error(`complete of ${key} refused`);
}

describeWithServices(
  ['redis', 'kafka'],
  'kafka: a DUPLICATE whose stored result this version cannot decode',
  ({ redis: redisUrl, kafka: brokers }) => {
    const suite = useKafkaSuite(brokers, redisUrl);

    it.each(['eachMessage', 'eachBatch'] as const)(
      '%s: resolved as a DUPLICATE with a storeError (settle), the handler does not run, the offset is committed past it (a new consumer of the group does not get it again)',
      async (form) => {
        const topic = uniqueName('unreadable');
        const groupId = uniqueName('g');
        const idempotency = redisRunner(suite.redis, { leaseMs: 5000 });
        await completedUnreadable(idempotency, `${groupId}/${topic}`, 'newer');
        const runs: string[] = [];
        const events: RecordedEvent[] = [];
        const handler = ({ key = '' }: { key?: string | undefined }) => {
          runs.push(key);
          return 'charged';
        };
        await suite.producer.send({
          topic,
          messages: [
            { partition: 0, value: 'a', headers: { 'idempotency-key': 'newer' } },
            { partition: 0, value: 'b', headers: { 'idempotency-key': 'after' } },
          ],
        });
        const deps = (consumer: Consumer) => ({
          idempotency,
          consumer,
          producer: suite.producer,
          logger: false as const,
        });
        // A backoff far longer than the test: a partition paused for the message (the old behaviour, a
        // pause on every fetch) would not get to `after` within it.
        const options = { groupId, deadLetterTopic: false, retryBackoff: { baseMs: 60_000 } } as const;
        const first = await suite.start(groupId, topic, (consumer) =>
          form === 'eachMessage'
            ? { eachMessage: recordEvents(idempotentEachMessage(deps(consumer), options, handler), events) }
            : { eachBatch: recordEvents(idempotentEachBatch(deps(consumer), options, handler), events) },
        );
        // The partition is handled in order: once `after` settled, `newer` was settled before it.
        await waitFor(
          'the message behind it to settle',
          () => events.some((e) => e.type === 'settled' && e.key === 'after'),
          30_000,
        );
        expect(runs).toEqual(['after']);
        expect(events.filter((e) => e.type === 'settled')).toEqual([
          expect.objectContaining({
            source: { topic, partition: 0, offset: '0' },
            key: 'newer',
            outcome: 'DUPLICATE',
            attempt: 1,
            decision: expect.objectContaining({ action: 'resolve', reason: 'duplicate' }),
          }),
          expect.objectContaining({ key: 'after', outcome: 'ACQUIRED' }),
        ]);
        expect(events.filter((e) => e.type === 'storeError')).toEqual([
          expect.objectContaining({
            operation: 'settle',
            error: expect.any(UnreadableResultError),
            source: { topic, partition: 0, offset: '0' },
          }),
        ]);
        expect(events.filter((e) => e.type === 'storeUnavailable')).toEqual([]);

        // Committed past both: the group's offset of partition 0 is 2.
        await waitForCommitted(suite.kafka, groupId, topic, 0, '2');

        // The group's next consumer starts at the committed offset: the first message it gets is one
        // produced after the test's two, not `newer` again.
        await first.disconnect();
        await suite.producer.send({
          topic,
          messages: [{ partition: 0, value: 'c', headers: { 'idempotency-key': 'sentinel' } }],
        });
        const fetched: string[] = [];
        const next = await startConsumer(suite.kafka, groupId, topic, () => ({
          eachMessage: async ({ message }) => {
            fetched.push(`${message.offset}:${message.headers?.['idempotency-key']?.toString()}`);
          },
        }));
        try {
          await waitFor('the new consumer to get the sentinel', () => fetched.length > 0, 30_000);
          expect(fetched).toEqual(['2:sentinel']);
        } finally {
          await next.disconnect();
        }
        expect(runs).toEqual(['after']);
      },
      90_000,
    );
  },
);
