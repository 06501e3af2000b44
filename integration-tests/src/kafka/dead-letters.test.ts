import { NonRetryableError } from '@idempotent-consumer/core';
import { DEAD_LETTER_HEADERS, idempotentEachMessage } from '@idempotent-consumer/kafka';
import { Kafka, logLevel, type Producer } from 'kafkajs';
import { startConsumer, uniqueName } from '../../support/kafka-fixture';
import { KafkaProxy } from '../../support/kafka-proxy';
import { settlesWithin, waitFor } from '../../support/net';
import { describeWithServices } from '../../support/service';
import { redisRunner, useKafkaSuite } from './kafka-suite';
import { type RecordedEvent, recordEvents } from './recorded-events';

describeWithServices(
  ['redis', 'kafka'],
  'kafka: dead letters (a produce the broker does not answer, a re-fetch before the commit)',
  ({ redis: redisUrl, kafka: brokers }) => {
    jest.setTimeout(90_000);
    const suite = useKafkaSuite(brokers, redisUrl);

    it('eachMessage: close() ends the produce in flight at once; consumer.disconnect() is prompt, the offset is not committed, the message comes back and is dead-lettered, no unhandled rejection', async () => {
      const topic = uniqueName('dl-stall');
      const groupId = uniqueName('g');
      const idempotency = redisRunner(suite.redis, { leaseMs: 5000 });
      const unhandled: unknown[] = [];
      const onUnhandled = (reason: unknown) => unhandled.push(reason);
      process.on('unhandledRejection', onUnhandled);
      const proxy = await KafkaProxy.start(brokers);
      // A producer that reaches the brokers only through the proxies; one try per request (KafkaJS's
      // default request timeout, 30 s, is then the whole wait of a produce nobody answers).
      const stalling = new Kafka({
        clientId: 'ic-stalling',
        brokers: brokers.split(','),
        logLevel: logLevel.NOTHING,
        socketFactory: proxy.socketFactory,
        retry: { retries: 0 },
      }).producer();
      /** Whether the wrapper's dead-letter send settled (watched without handling its rejection). */
      let sendSettled = false;
      const watched: Pick<Producer, 'send'> = {
        send: (record) =>
          new Promise((resolve, reject) => {
            stalling.send(record).then(
              (value) => {
                sendSettled = true;
                resolve(value);
              },
              (error: unknown) => {
                sendSettled = true;
                reject(error);
              },
            );
          }),
      };
      try {
        await stalling.connect();
        // The dead-letter topic's metadata is known before the stall: what goes unanswered is the produce.
        await stalling.send({ topic: `${topic}.dlq`, messages: [{ value: 'warm-up' }] });
        await suite.producer.send({
          topic,
          messages: [{ partition: 0, value: 'poison', headers: { 'idempotency-key': 'poison' } }],
        });
        proxy.stall();
        const runs: string[] = [];
        const events: RecordedEvent[] = [];
        let wrapper: ReturnType<typeof idempotentEachMessage> | undefined;
        const consumer = await startConsumer(suite.kafka, groupId, topic, (c) => {
          wrapper = recordEvents(
            idempotentEachMessage({ idempotency, consumer: c, producer: watched }, { groupId }, ({ key }) => {
              runs.push(key!);
              throw new NonRetryableError('card declined');
            }),
            events,
          );
          return { eachMessage: wrapper };
        });
        try {
          await waitFor(
            'the dead-letter produce to go unanswered',
            () => runs.length === 1 && proxy.heldBytes > 0,
          );
          const started = performance.now();
          wrapper!.close();
          const disconnected = await settlesWithin(
            'consumer.disconnect() after close()',
            consumer.disconnect(),
            10_000,
          );
          expect(disconnected.status).toBe('fulfilled');
          expect(performance.now() - started).toBeLessThan(10_000);
        } finally {
          await consumer.disconnect();
        }
        expect(events.filter((e) => e.type === 'deadLettered' || e.type === 'settled')).toEqual([]);
        // Nothing past the message was committed.
        const admin = suite.kafka.admin();
        await admin.connect();
        try {
          const [offsets] = await admin.fetchOffsets({ groupId, topics: [topic] });
          const committed = offsets!.partitions.find((p) => p.partition === 0)!.offset;
          expect(Number(committed)).toBeLessThanOrEqual(0);
        } finally {
          await admin.disconnect();
        }

        // The produce nobody answered ends (the proxies go away) without an unhandled rejection.
        await proxy.close();
        await waitFor('the abandoned produce to settle', () => sendSettled, 30_000);
        await new Promise((resolve) => setImmediate(resolve));
        expect(unhandled).toEqual([]);

        // The message comes back: its FAILED record is dead-lettered without running the handler again.
        const again: RecordedEvent[] = [];
        const next = await startConsumer(suite.kafka, groupId, topic, (c) => ({
          eachMessage: recordEvents(
            idempotentEachMessage(
              { idempotency, consumer: c, producer: suite.producer },
              { groupId },
              ({ key }) => {
                runs.push(key!);
              },
            ),
            again,
          ),
        }));
        try {
          await waitFor('the dead letter', () => again.some((e) => e.type === 'deadLettered'), 20_000);
        } finally {
          await next.disconnect();
        }
        expect(again.find((e) => e.type === 'deadLettered')).toMatchObject({
          key: 'poison',
          outcome: 'FAILED',
          source: { topic, partition: 0, offset: '0' },
        });
        expect(runs).toEqual(['poison']);
      } finally {
        process.off('unhandledRejection', onUnhandled);
        await proxy.close();
        await stalling.disconnect().catch(() => {});
      }
    });

    it('eachMessage: a message without a key is dead-lettered again (a second copy, a second deadLettered event); a FAILED record is not (one copy, one event): every deadLettered event is a copy on the dead-letter topic', async () => {
      const topic = uniqueName('dl-again');
      const groupId = uniqueName('g');
      const idempotency = redisRunner(suite.redis, { leaseMs: 5000 });
      await suite.producer.send({
        topic,
        messages: [
          { partition: 0, value: 'no key' },
          { partition: 0, value: 'poison', headers: { 'idempotency-key': 'poison' } },
        ],
      });
      const events: RecordedEvent[] = [];
      const consumer = await suite.start(groupId, topic, (c) => ({
        eachMessage: recordEvents(
          idempotentEachMessage(
            { idempotency, consumer: c, producer: suite.producer },
            // Only the header is a key (the default falls back to the message's position).
            { groupId, idempotencyKey: (message) => message.headers?.['idempotency-key']?.toString() },
            () => {
              throw new NonRetryableError('card declined');
            },
          ),
          events,
        ),
      }));
      const of = (type: RecordedEvent['type'], offset: string) =>
        events.filter((e) => e.type === type && 'source' in e && e.source?.offset === offset);
      await waitFor('both dead-lettered', () => of('settled', '0').length + of('settled', '1').length === 2);
      // Fetched again before a commit would be (a seek; a rebalance after a failed commit does the same).
      consumer.seek({ topic, partition: 0, offset: '0' });
      await waitFor('both settled again', () => of('settled', '0').length + of('settled', '1').length === 4);

      expect(of('deadLettered', '0')).toHaveLength(2);
      expect(of('deadLettered', '0')[1]).toMatchObject({
        reason: 'missing-key',
        destination: `${topic}.dlq`,
      });
      expect(of('deadLettered', '1')).toHaveLength(1);
      expect(of('settled', '1')[1]).toMatchObject({
        decision: { action: 'resolve', reason: 'dead-lettered-before' },
      });

      // The dead-letter topic holds exactly one copy per deadLettered event.
      const admin = suite.kafka.admin();
      await admin.connect();
      try {
        const ends = await admin.fetchTopicOffsets(`${topic}.dlq`);
        expect(ends.reduce((n, p) => n + Number(p.high) - Number(p.low), 0)).toBe(3);
      } finally {
        await admin.disconnect();
      }
      const copies: string[] = [];
      const reader = await startConsumer(suite.kafka, uniqueName('dlq-reader'), `${topic}.dlq`, () => ({
        eachMessage: async ({ message }) => {
          copies.push(String(message.headers?.[DEAD_LETTER_HEADERS.originalOffset]));
        },
      }));
      try {
        await waitFor('the three copies', () => copies.length === 3);
      } finally {
        await reader.disconnect();
      }
      expect(copies.sort()).toEqual(['0', '0', '1']);
    });
  },
);
