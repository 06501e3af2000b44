import { NonRetryableError } from '@idempotent-consumer/core';
import { type IdempotentEachMessage, idempotentEachMessage } from '@idempotent-consumer/kafka';
import { type Consumer, Kafka, logLevel } from 'kafkajs';
import { header, readTopic, uniqueName } from '../../support/kafka-fixture';
import { waitFor } from '../../support/net';
import { describeWithServices } from '../../support/service';
import { countSettled, redisRunner, useKafkaSuite } from './kafka-suite';
import { type RecordedEvent, recordEvents } from './recorded-events';

describeWithServices(
  ['redis', 'kafka'],
  'kafka eachMessage on real Redis',
  ({ redis: redisUrl, kafka: brokers }) => {
    const suite = useKafkaSuite(brokers, redisUrl);

    /**
     * Produces one message per `[value, key]` pair to `partition` of `topic`, in order, in one request; the
     * key goes in the `idempotency-key` header (no header where it is undefined).
     */
    async function produceTo(topic: string, partition: number, ...pairs: [string, string?][]) {
      await suite.producer.send({
        topic,
        messages: pairs.map(([value, key]) => ({
          partition,
          value,
          ...(key === undefined ? {} : { headers: { 'idempotency-key': key } }),
        })),
      });
    }

    /** A new topic named after `what`, a new group, and a runner with `maxAttempts` on a new key prefix. */
    function fresh(what: string, maxAttempts = 3) {
      return {
        topic: uniqueName(what),
        groupId: uniqueName('g'),
        idempotency: redisRunner(suite.redis, { leaseMs: 3000, maxAttempts }, { commandTimeoutMs: 1000 }),
      };
    }

    /** Starts a consumer of `groupId` on `topic` whose `eachMessage` is the wrapper `make` builds. */
    function consume(groupId: string, topic: string, make: (consumer: Consumer) => IdempotentEachMessage) {
      return suite.start(groupId, topic, (consumer) => ({ eachMessage: make(consumer) }));
    }

    it('runs a key produced at several offsets once', async () => {
      const { topic, groupId, idempotency } = fresh('dupes');
      const runs = new Map<string, number>();
      const settled = countSettled(idempotency);
      // 12 keys, each sent 3 times with the same key but to any partition, interleaved.
      const messages = [0, 1, 2].flatMap(() =>
        Array.from({ length: 12 }, (_, i) => ({
          value: `payment-${i}`,
          headers: { 'idempotency-key': `pay-${i}` },
        })),
      );
      for (const m of messages)
        await suite.producer.send({ topic, messages: [{ ...m, key: `${Math.random()}` }] });
      const make = (consumer: Consumer) =>
        idempotentEachMessage({ idempotency, consumer, producer: suite.producer }, { groupId }, ({ key }) => {
          runs.set(String(key), (runs.get(String(key)) ?? 0) + 1);
        });
      await consume(groupId, topic, make);
      await waitFor('36 deliveries settled', () => settled() >= 36, 30_000);
      expect(runs.size).toBe(12);
      expect([...runs.values()].every((n) => n === 1)).toBe(true);
      expect(settled()).toBe(36);
    }, 60_000);

    it('retries a failing handler with backoff, then dead-letters it with the error headers', async () => {
      const { topic, groupId, idempotency } = fresh('fail', 3);
      const attemptsAt: number[] = [];
      const okRuns: string[] = [];
      const events: RecordedEvent[] = [];
      await produceTo(topic, 0, ['bad', 'bad-1'], ['good', 'good-1']);
      const make = (consumer: Consumer) =>
        recordEvents(
          idempotentEachMessage(
            { idempotency, consumer, producer: suite.producer },
            { groupId, retryBackoff: { baseMs: 200, factor: 2, jitter: 'none' } },
            ({ key, attempt }) => {
              if (key === 'bad-1') {
                attemptsAt.push(performance.now());
                throw new Error(`gateway timeout on attempt ${attempt}`);
              }
              okRuns.push(String(key));
            },
          ),
          events,
        );
      await consume(groupId, topic, make);
      await waitFor('the good message after the bad one', () => okRuns.length === 1, 30_000);
      expect(attemptsAt).toHaveLength(3);
      // Backoff 200 ms after attempt 1, 400 ms after attempt 2 (jitter off).
      expect(attemptsAt[1]! - attemptsAt[0]!).toBeGreaterThanOrEqual(190);
      expect(attemptsAt[2]! - attemptsAt[1]!).toBeGreaterThanOrEqual(390);
      const [letter, ...more] = await readTopic(brokers, `${topic}.dlq`, 1);
      expect(more).toHaveLength(0);
      expect(letter!.value!.toString()).toBe('bad');
      expect(header(letter!.headers, 'x-idempotency-dead-letter-reason')).toBe('attempts-exhausted');
      expect(header(letter!.headers, 'x-idempotency-outcome')).toBe('ACQUIRED');
      expect(header(letter!.headers, 'x-idempotency-attempt')).toBe('3');
      expect(header(letter!.headers, 'x-idempotency-error')).toContain('gateway timeout on attempt 3');
      expect(header(letter!.headers, 'x-original-topic')).toBe(topic);
      expect(header(letter!.headers, 'x-original-partition')).toBe('0');
      expect(header(letter!.headers, 'x-original-offset')).toBe('0');
      expect(header(letter!.headers, 'idempotency-key')).toBe('bad-1');
      expect(
        events.filter((e) => e.type === 'retryScheduled' && e.reason === 'handler-error' && !e.paused),
      ).toHaveLength(2);
      const record = await idempotency.store.get({ scope: `${groupId}/${topic}`, key: 'bad-1' });
      expect(record).toMatchObject({ state: 'FAILED', attempt: 3 });
    }, 60_000);

    it('pauses the partition for a backoff above maxInlineDelayMs, without resolving the offset', async () => {
      const { topic, groupId, idempotency } = fresh('pause', 2);
      const events: RecordedEvent[] = [];
      const runs: string[] = [];
      await produceTo(topic, 1, ['flaky', 'flaky-1'], ['next', 'next-1'], ['fatal', 'fatal-1']);
      const make = (consumer: Consumer) =>
        recordEvents(
          idempotentEachMessage(
            { idempotency, consumer, producer: suite.producer },
            { groupId, maxInlineDelayMs: 0, retryBackoff: { baseMs: 300, jitter: 'none' } },
            ({ key, attempt }) => {
              runs.push(`${key}#${attempt}`);
              if (key === 'flaky-1' && attempt === 1) throw new TypeError('flaky dependency'); // must not stop KafkaJS
              if (key === 'fatal-1') throw new NonRetryableError('card declined');
            },
          ),
          events,
        );
      await consume(groupId, topic, make);
      await waitFor(
        'all three settled',
        () => runs.includes('fatal-1#1') && events.some((e) => e.type === 'deadLettered'),
        30_000,
      );
      expect(runs).toEqual(['flaky-1#1', 'flaky-1#2', 'next-1#1', 'fatal-1#1']);
      expect(events).toContainEqual(
        expect.objectContaining({
          type: 'retryScheduled',
          source: { topic, partition: 1, offset: '0' },
          reason: 'handler-error',
          paused: true,
          delayMs: 300,
        }),
      );
      const [letter] = await readTopic(brokers, `${topic}.dlq`, 1);
      expect(header(letter!.headers, 'x-idempotency-dead-letter-reason')).toBe('non-retryable');
      expect(header(letter!.headers, 'x-idempotency-outcome')).toBe('ACQUIRED');
      expect(header(letter!.headers, 'x-idempotency-attempt')).toBe('1');
      expect(header(letter!.headers, 'x-idempotency-error')).toContain('card declined');
    }, 60_000);

    it('dead-letters a payload mismatch without running it', async () => {
      const { topic, groupId, idempotency } = fresh('mismatch');
      const runs: string[] = [];
      await produceTo(topic, 2, ['{"amount":100}', 'order-7'], ['{"amount":999}', 'order-7']);
      const make = (consumer: Consumer) =>
        idempotentEachMessage(
          { idempotency, consumer, producer: suite.producer },
          { groupId },
          ({ message }) => {
            runs.push(message.value!.toString());
          },
        );
      await consume(groupId, topic, make);
      const [letter] = await readTopic(brokers, `${topic}.dlq`, 1);
      expect(runs).toEqual(['{"amount":100}']);
      expect(letter!.value!.toString()).toBe('{"amount":999}');
      expect(header(letter!.headers, 'x-idempotency-dead-letter-reason')).toBe('payload-mismatch');
      expect(header(letter!.headers, 'x-idempotency-outcome')).toBe('PAYLOAD_MISMATCH');
      // The same text in every broker's dead letter (deadLetterOf in the core kit).
      expect(header(letter!.headers, 'x-idempotency-error')).toBe(
        'PayloadMismatchError [PAYLOAD_MISMATCH]: the idempotency key was first used with another payload (record COMPLETED)',
      );
      expect(header(letter!.headers, 'x-original-offset')).toBe('1');
    }, 60_000);

    it('missingKey: process runs UNPROTECTED with no key, retries a bounded number of times, then dead-letters', async () => {
      const { topic, groupId, idempotency } = fresh('unprotected', 3);
      const runs: unknown[] = [];
      const events: RecordedEvent[] = [];
      await produceTo(topic, 0, ['no-key'], ['next', 'next-1']);
      const make = (consumer: Consumer) =>
        recordEvents(
          idempotentEachMessage(
            { idempotency, consumer, producer: suite.producer },
            {
              groupId,
              idempotencyKey: (m) => m.headers?.['idempotency-key']?.toString(),
              missingKey: 'process',
              retryBackoff: { baseMs: 50, jitter: 'none' },
            },
            ({ key, outcome, attempt, fencingToken, message }) => {
              runs.push({ key, outcome, attempt, fencingToken });
              if (message.value!.toString() === 'no-key') throw new Error('downstream 503');
            },
          ),
          events,
        );
      await consume(groupId, topic, make);
      const [letter] = await readTopic(brokers, `${topic}.dlq`, 1);
      await waitFor(
        'the keyed message after it',
        () => runs.some((r) => (r as { key: unknown }).key === 'next-1'),
        30_000,
      );
      expect(runs.slice(0, 3)).toEqual(
        [1, 2, 3].map((attempt) => ({
          key: undefined,
          outcome: 'UNPROTECTED',
          attempt,
          fencingToken: 0,
        })),
      );
      expect(runs[3]).toMatchObject({ key: 'next-1', outcome: 'ACQUIRED', attempt: 1 });
      expect(header(letter!.headers, 'x-idempotency-dead-letter-reason')).toBe('attempts-exhausted');
      expect(header(letter!.headers, 'x-idempotency-outcome')).toBe('UNPROTECTED');
      expect(header(letter!.headers, 'x-idempotency-attempt')).toBe('3');
      expect(events).toContainEqual(expect.objectContaining({ type: 'missingKey', action: 'process' }));
      expect(events).toContainEqual(
        expect.objectContaining({
          type: 'settled',
          decision: expect.objectContaining({ action: 'dead-letter' }),
          outcome: 'UNPROTECTED',
          key: undefined,
        }),
      );
    }, 60_000);

    it('an expected pause is not logged by KafkaJS as an ERROR with a stack', async () => {
      const { topic, groupId, idempotency } = fresh('quiet-pause', 2);
      const errors: string[] = [];
      const logged = new Kafka({
        clientId: 'ic-quiet',
        brokers: brokers.split(','),
        logLevel: logLevel.ERROR,
        retry: { retries: 8 },
        logCreator:
          () =>
          ({ level, log }) => {
            if (level === logLevel.ERROR) errors.push(`${log.message} ${String(log.stack ?? '')}`);
          },
      });
      const runs: string[] = [];
      const events: RecordedEvent[] = [];
      await produceTo(topic, 0, ['flaky', 'q-1']);
      await suite.start(
        groupId,
        topic,
        (consumer) => ({
          eachMessage: recordEvents(
            idempotentEachMessage(
              { idempotency, consumer, producer: suite.producer },
              { groupId, maxInlineDelayMs: 0, retryBackoff: { baseMs: 200, jitter: 'none' } },
              ({ key, attempt }) => {
                runs.push(`${key}#${attempt}`);
                if (attempt === 1) throw new Error('flaky dependency');
              },
            ),
            events,
          ),
        }),
        {},
        logged,
      );
      await waitFor('the retry after the pause', () => runs.includes('q-1#2'), 30_000);
      expect(events).toContainEqual(expect.objectContaining({ type: 'retryScheduled', paused: true }));
      expect(errors.filter((e) => e.includes('eachMessage'))).toEqual([]);
    }, 60_000);
  },
);
