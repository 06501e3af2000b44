import { randomBytes } from 'node:crypto';
import type { TransactionalInbox } from '@idempotent-consumer/inbox-sql';
import { idempotentEachMessage, type KafkaHandlerContext } from '@idempotent-consumer/kafka';
import { IdempotentSqsPoller, type SqsIdempotencyEvents } from '@idempotent-consumer/sqs';
import { uniqueName } from '../../support/kafka-fixture';
import { freePort, waitFor } from '../../support/net';
import { describeWithServices } from '../../support/service';
import { SqlDatabase, useSqlDatabase } from '../../support/sql-database';
import { SqsFixture } from '../../support/sqs-fixture';
import { sendMessage } from '../../support/sqs-helpers';
import { countSettled, redisRunner, useKafkaSuite } from '../kafka/kafka-suite';
import { acks, RabbitFixture } from '../rabbitmq/fixture';

jest.setTimeout(120_000);

describeWithServices(
  ['redis', 'rabbitmq', 'postgres'],
  'inbox with the RabbitMQ adapter',
  ({ redis, rabbitmq, postgres }) => {
    const db = useSqlDatabase('postgres', postgres);
    let fx: RabbitFixture;
    beforeAll(async () => {
      fx = await new RabbitFixture(rabbitmq, redis).open();
    });
    afterAll(() => fx?.close());

    it('database down: nothing acked as done, retried until it is back; duplicates and a Redis wipe write nothing more', async () => {
      const port = await freePort();
      const down = await SqlDatabase.attach(
        'postgres',
        `postgres://postgres@127.0.0.1:${port}/test`,
        db().schema,
        1,
      );
      let inbox: TransactionalInbox = down.inbox(); // the database is down at first
      const { events } = await fx.consumer(fx.idempotency({ leaseMs: 2000 }), {}, (ctx) =>
        // RabbitMqHandlerContext carries the key and the fencing token the inbox needs.
        inbox.run(ctx, (tx) => db().writeLedger(tx, ctx.key!, ctx.fencingToken)),
      );
      const messageId = `pay-${randomBytes(4).toString('hex')}`;
      fx.publish({ amountCents: 500 }, { messageId });
      await waitFor(
        'two retries while the database is down',
        () => events.retryScheduled.length >= 2,
        30_000,
      );
      expect(acks(events)).toEqual([]);
      expect(await db().ledger()).toEqual({});

      inbox = db().inbox(); // the database is back
      await waitFor(
        'the payment completed',
        () => acks(events).some((a) => a.decision.reason === 'completed'),
        30_000,
      );
      fx.publish({ amountCents: 500 }, { messageId });
      fx.publish({ amountCents: 500 }, { messageId });
      await waitFor(
        'two duplicates acked',
        () => acks(events).filter((a) => a.decision.reason === 'duplicate').length >= 2,
        30_000,
      );

      const keys = await fx.redis.keys(`${fx.prefix}:*`);
      await fx.redis.del(...keys); // Redis loses this test's records
      fx.publish({ amountCents: 500 }, { messageId });
      await waitFor(
        'the redelivery after the wipe completed',
        () => acks(events).filter((a) => a.decision.reason === 'completed').length >= 2,
        30_000,
      );
      expect(await db().ledger()).toEqual({ [messageId]: 1 });
      await down.close();
    });
  },
);

describeWithServices(['redis', 'sqs', 'mysql'], 'inbox with the SQS poller', ({ redis, sqs, mysql }) => {
  const db = useSqlDatabase('mysql', mysql);
  // Declared before the fixture's own afterAll (the close), so it runs first.
  afterAll(async () => {
    const keys = await fx.redis.keys(`${fx.prefix}*`);
    if (keys.length > 0) await fx.redis.del(...keys);
  });
  const fx = SqsFixture.forSuite(redis, sqs);

  it('the same payment sent three times is written once', async () => {
    const q = await fx.queue('inbox');
    const inbox = db().inbox();
    const processed: SqsIdempotencyEvents['settled'][0][] = [];
    const poller = new IdempotentSqsPoller(
      { idempotency: fx.idempotency({ leaseMs: 5000 }), sqs: fx.sqs },
      { queueUrl: q.url, waitTimeSeconds: 1 },
      (ctx) => inbox.run(ctx, (tx) => db().writeLedger(tx, ctx.key!, ctx.fencingToken)),
    );
    poller.on('settled', (p) => processed.push(p));
    for (let i = 0; i < 3; i++) await sendMessage(fx.sqs, q.url, 'charge', { key: 'sqs-pay-1' });
    poller.start();
    try {
      await waitFor(
        'three messages deleted',
        () => processed.filter((p) => p.decision.action === 'delete').length >= 3,
        60_000,
      );
    } finally {
      await poller.stop();
    }
    expect(await db().ledger()).toEqual({ 'sqs-pay-1': 1 });
  });
});

describeWithServices(
  ['redis', 'kafka', 'postgres'],
  'inbox with Kafka eachMessage',
  ({ redis, kafka, postgres }) => {
    const db = useSqlDatabase('postgres', postgres);
    const keyPrefix = uniqueName('inbox-idem');
    // Declared before the suite's own afterAll (which quits the client), so it runs first.
    afterAll(async () => {
      const keys = await suite.redis.keys(`${keyPrefix}*`);
      if (keys.length > 0) await suite.redis.del(...keys);
    });
    const suite = useKafkaSuite(kafka, redis, {});

    it('a key produced at several offsets is written once (inbox.handler as the eachMessage handler)', async () => {
      const topic = uniqueName('inbox');
      const groupId = uniqueName('g');
      const idempotency = redisRunner(suite.redis, { leaseMs: 3000 }, { keyPrefix });
      const settled = countSettled(idempotency);
      const inbox = db().inbox();
      for (let i = 0; i < 3; i++) {
        await suite.producer.send({
          topic,
          messages: [0, 1, 2, 3].map((n) => ({
            value: `pay-${n}`,
            headers: { 'idempotency-key': `kafka-pay-${n}` },
          })),
        });
      }
      await suite.start(groupId, topic, (c) => ({
        eachMessage: idempotentEachMessage(
          { idempotency, consumer: c, producer: suite.producer },
          { groupId },
          inbox.handler<KafkaHandlerContext>((tx, ctx) => db().writeLedger(tx, ctx.key!, ctx.fencingToken)),
        ),
      }));
      await waitFor('12 deliveries settled', () => settled() >= 12, 60_000);
      expect(await db().ledger()).toEqual({
        'kafka-pay-0': 1,
        'kafka-pay-1': 1,
        'kafka-pay-2': 1,
        'kafka-pay-3': 1,
      });
    });
  },
);
