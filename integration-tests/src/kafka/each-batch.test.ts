import { idempotentEachBatch } from '@idempotent-consumer/kafka';
import { header, readTopic, uniqueName } from '../../support/kafka-fixture';
import { waitFor } from '../../support/net';
import { describeWithServices } from '../../support/service';
import { countSettled, redisRunner, useKafkaSuite } from './kafka-suite';
import { type RecordedEvent, recordEvents } from './recorded-events';

describeWithServices(
  ['redis', 'kafka'],
  'kafka eachBatch on real Redis',
  ({ redis: redisUrl, kafka: brokers }) => {
    const suite = useKafkaSuite(brokers, redisUrl);

    it('claims a batch in one round trip and runs a key produced at several offsets once', async () => {
      const topic = uniqueName('batch');
      const groupId = uniqueName('g');
      const idempotency = redisRunner(suite.redis, { leaseMs: 3000 });
      const claimMany = jest.spyOn(idempotency.store, 'claimMany');
      const claim = jest.spyOn(idempotency.store, 'claim');
      const order: string[] = [];
      const settled = countSettled(idempotency);
      const outcomes: Record<string, number> = {};
      idempotency.on('outcome', ({ outcome }) => {
        outcomes[outcome] = (outcomes[outcome] ?? 0) + 1;
      });
      // One partition, produced in one request: KafkaJS fetches it as one batch.
      const messages = Array.from({ length: 30 }, (_, i) => ({
        partition: 3,
        value: `v${i % 10}`,
        headers: { 'idempotency-key': `pay-${i % 10}` },
      }));
      await suite.producer.send({ topic, messages });
      await suite.start(groupId, topic, (consumer) => ({
        eachBatch: idempotentEachBatch(
          { idempotency, consumer },
          { groupId, deadLetterTopic: false },
          ({ key = '' }) => {
            order.push(key);
          },
        ),
      }));
      await waitFor('30 deliveries settled', () => settled() >= 30, 30_000);
      expect(order).toEqual(Array.from({ length: 10 }, (_, i) => `pay-${i}`)); // partition order, once each
      // One claimMany for the 10 distinct keys; their 20 repeats claim one by one when their turn comes,
      // after the first occurrence completed: DUPLICATE at once, never a CONFLICT with the batch's own claim.
      expect(claimMany.mock.calls.length).toBeLessThanOrEqual(2); // the mock may split the fetch in two
      expect(claimMany.mock.calls.flatMap((c) => c[0]).length + claim.mock.calls.length).toBe(30);
      expect(outcomes.CONFLICT ?? 0).toBe(0);
      expect(outcomes.DUPLICATE).toBe(20);
    }, 60_000);

    it('pauses on a failing message without resolving it, then dead-letters it; later messages run once', async () => {
      const topic = uniqueName('batch-fail');
      const groupId = uniqueName('g');
      const idempotency = redisRunner(suite.redis, { leaseMs: 3000, maxAttempts: 3 });
      const runs: string[] = [];
      const events: RecordedEvent[] = [];
      await suite.producer.send({
        topic,
        messages: ['a', 'bad', 'b', 'c'].map((k) => ({
          partition: 0,
          value: k,
          headers: { 'idempotency-key': k },
        })),
      });
      await suite.start(groupId, topic, (consumer) => ({
        eachBatch: recordEvents(
          idempotentEachBatch(
            { idempotency, consumer, producer: suite.producer },
            { groupId, maxInlineDelayMs: 0, retryBackoff: { baseMs: 200, jitter: 'none' } },
            ({ key, attempt }) => {
              runs.push(`${key}#${attempt}`);
              if (key === 'bad') throw new Error('downstream 503');
            },
          ),
          events,
        ),
      }));
      const [letter] = await readTopic(brokers, `${topic}.dlq`, 1);
      await waitFor('c to run', () => runs.includes('c#1') || runs.includes('c#2'), 20_000);
      expect(runs.filter((r) => r.startsWith('bad'))).toEqual(['bad#1', 'bad#2', 'bad#3']);
      expect(runs.filter((r) => !r.startsWith('bad')).map((r) => r.split('#')[0])).toEqual(['a', 'b', 'c']);
      // b and c were reserved with the first batch and given back at the first pause without an attempt
      // spent (core claimMany reserves; the attempt counts when the handler starts): each runs as attempt 1.
      expect(runs).toContain('b#1');
      expect(runs).toContain('c#1');
      expect(
        events.filter((e) => e.type === 'retryScheduled' && e.reason === 'handler-error' && e.paused),
      ).toHaveLength(2);
      expect(header(letter!.headers, 'x-idempotency-attempt')).toBe('3');
      expect(header(letter!.headers, 'x-idempotency-error')).toContain('downstream 503');
      expect(header(letter!.headers, 'x-original-offset')).toBe('1');
    }, 60_000);

    it('a header key the store refuses (longer than its maxKeyBytes) is dead-lettered as invalid-key and reported by the wrapper: an invalidKey event each, one warning, no runner error line', async () => {
      const topic = uniqueName('batch-long-key');
      const groupId = uniqueName('g');
      const idempotency = redisRunner(suite.redis, { leaseMs: 3000 });
      const runs: string[] = [];
      const invalid: string[] = [];
      const lines: string[] = [];
      const keep = (message: string) => void lines.push(message);
      const tooLong = (i: number) => `${'k'.repeat(600)}-${i}`; // the store takes 512 bytes
      await suite.producer.send({
        topic,
        messages: [tooLong(1), 'fine', tooLong(2)].map((k) => ({
          partition: 0,
          value: k.slice(0, 8),
          headers: { 'idempotency-key': k },
        })),
      });
      await suite.start(groupId, topic, (consumer) => {
        const wrapper = idempotentEachBatch(
          { idempotency, consumer, producer: suite.producer, logger: { warn: keep, error: keep } },
          { groupId },
          ({ key }) => {
            runs.push(key!);
          },
        );
        wrapper.events.on('invalidKey', (e) => invalid.push(e.error.name));
        return { eachBatch: wrapper };
      });
      const letters = await readTopic(brokers, `${topic}.dlq`, 2);
      expect(letters.map((l) => header(l.headers, 'x-idempotency-dead-letter-reason'))).toEqual([
        'invalid-key',
        'invalid-key',
      ]);
      await waitFor('the fine message to run', () => runs.includes('fine'));
      expect(runs).toEqual(['fine']);
      expect(invalid).toEqual(['InvalidKeyError', 'InvalidKeyError']);
      // The wrapper's one warning says it; the runner no longer adds an error line per message (nor per
      // batch claim the key made fail).
      expect(lines).toEqual([
        expect.stringMatching(
          /invalid idempotency key or payload \(InvalidKeyError \[INVALID_IDEMPOTENCY_KEY\]: The idempotency key is 602 bytes long.*dead-lettered to .*\.dlq \(reason invalid-key\)/,
        ),
      ]);
    }, 60_000);
  },
);
