import {
  NonRetryableError,
  RedisIdempotencyStore,
  StoreUnavailableError,
  UnreadableResultError,
} from '@idempotent-consumer/core';
import {
  createIdempotentConsumer,
  DEAD_LETTER_HEADERS,
  IDEMPOTENCY_KEY_HEADER,
} from '@idempotent-consumer/rabbitmq';
import { type ChannelModel, connect } from 'amqplib';
import { recordingLogger, withClosedRedis } from '../../support/closed-redis';
import { waitFor } from '../../support/net';
import { describeWithServices } from '../../support/service';
import { acks, pause, RabbitFixture } from './fixture';

describeWithServices(['rabbitmq', 'redis'], 'rabbitmq adapter: failure paths', (urls) => {
  jest.setTimeout(60_000);
  let fx: RabbitFixture;
  beforeEach(async () => {
    fx = await new RabbitFixture(urls.rabbitmq, urls.redis).open();
  });
  afterEach(() => fx.close());

  it('a Redis URL pointing at a closed port: start() fails promptly with StoreUnavailableError naming the host, and the console is not flooded', async () => {
    await withClosedRedis(async ({ redis, port, printed }) => {
      const logger = recordingLogger();
      const consumer = createIdempotentConsumer(
        {
          idempotency: fx.idempotency({}, new RedisIdempotencyStore({ redis }, { commandTimeoutMs: 1000 })),
          connection: fx.connection,
          logger,
        },
        { queue: fx.queue },
        () => {},
      );
      const started = performance.now();
      const error = await consumer.start().catch((e: unknown) => e);
      expect(error).toBeInstanceOf(StoreUnavailableError);
      expect((error as Error).message).toContain(`127.0.0.1:${port}`);
      expect(performance.now() - started).toBeLessThan(10_000);
      await pause(1500); // ioredis keeps reconnecting meanwhile: nothing may print per attempt
      expect(printed.filter((line) => line.includes('[ioredis] Unhandled error event'))).toEqual([]);
      expect(printed).toEqual([]);
      // The Redis client's error is detail at debug; the outage's one warning is the runner's.
      expect(logger.lines.filter((l) => l.includes('Redis client'))).toEqual([
        expect.stringMatching(/^debug /),
      ]);
    });
  });

  it('a fingerprint function that throws dead-letters the message as invalid-key and consumption goes on', async () => {
    const logger = recordingLogger();
    const ran: string[] = [];
    const { consumer, events } = await fx.consumer(
      fx.idempotency(),
      {
        fingerprint: (message) => {
          const body = JSON.parse(message.content.toString()) as { bad?: boolean };
          if (body.bad) throw new Error('unparsable payload');
          return body;
        },
      },
      ({ key }) => {
        ran.push(key!);
      },
      { connection: fx.connection, logger },
    );
    const invalid: unknown[] = [];
    consumer.on('invalidKey', (e) => invalid.push(e.error));
    fx.publish({ bad: true }, { messageId: 'bad' });
    fx.publish({ ok: true }, { messageId: 'good' });
    const [dead] = await fx.deadLetters(1);
    expect(dead!.properties.headers![DEAD_LETTER_HEADERS.reason]).toBe('invalid-key');
    await waitFor('the good message', () => ran.includes('good'));
    expect(ran).toEqual(['good']);
    expect(events.storeUnavailable).toEqual([]);
    expect(consumer.state).toBe('running');
    expect((invalid[0] as Error).name).toBe('InvalidPayloadError');
    expect(logger.lines.filter((l) => l.includes('invalid idempotency key'))).toHaveLength(1);
  });

  it('a header key the store refuses (longer than its maxKeyBytes) is dead-lettered as invalid-key and reported by the adapter: an invalidKey event each, one warning, no runner error line', async () => {
    const logger = recordingLogger();
    const ran: string[] = [];
    const { consumer } = await fx.consumer(
      fx.idempotency(),
      {},
      ({ key }) => {
        ran.push(key!);
      },
      { connection: fx.connection, logger },
    );
    const invalid: unknown[] = [];
    consumer.on('invalidKey', (e) => invalid.push(e.error));
    const tooLong = (i: number) => `${'k'.repeat(600)}-${i}`; // the store takes 512 bytes
    fx.publish({ n: 1 }, { headers: { [IDEMPOTENCY_KEY_HEADER]: tooLong(1) } });
    fx.publish({ n: 2 }, { headers: { [IDEMPOTENCY_KEY_HEADER]: tooLong(2) } });
    fx.publish({ n: 3 }, { messageId: 'good' });
    const dead = await fx.deadLetters(2);
    expect(dead.map((d) => d.properties.headers![DEAD_LETTER_HEADERS.reason])).toEqual([
      'invalid-key',
      'invalid-key',
    ]);
    await waitFor('the good message', () => ran.includes('good'));
    expect(ran).toEqual(['good']);
    expect(invalid.map((e) => (e as Error).name)).toEqual(['InvalidKeyError', 'InvalidKeyError']);
    // The adapter's one warning says it; the runner no longer adds an error line per message.
    expect(logger.lines).toEqual([
      expect.stringMatching(
        /invalid idempotency key or payload \(InvalidKeyError \[INVALID_IDEMPOTENCY_KEY\]: The idempotency key is 602 bytes long.*dead-lettered \(reason invalid-key\)/,
      ),
    ]);
  });

  it('a FAILED record is dead-lettered once: a redelivery of its key is acked without a second copy', async () => {
    let runs = 0;
    const { events } = await fx.consumer(fx.idempotency(), {}, () => {
      runs += 1;
      throw new NonRetryableError('bad');
    });
    fx.publish({ n: 1 }, { messageId: 'once' });
    await fx.deadLetters(1);
    fx.publish({ n: 1 }, { messageId: 'once' });
    await waitFor('the redelivery acked', () =>
      events.settled.some((e) => e.decision.action === 'ack' && e.decision.reason === 'dead-lettered-before'),
    );
    await pause(300);
    expect(await fx.depth(`${fx.queue}.dlq`)).toBe(0);
    expect(runs).toBe(1);
  });

  it('a DUPLICATE whose stored result this version cannot decode (a newer version wrote it) is acked as a duplicate, with a storeError; the handler does not run', async () => {
    const idempotency = fx.idempotency();
    const id = { scope: fx.queue, key: 'newer-1' };
    const claim = await idempotency.claim(id);
    // COMPLETED in Redis with a result in an encoding this version does not know.
    await idempotency.store.complete(id, claim.fencingToken, { retentionMs: 60_000, result: 'x{"v":2}' });
    let runs = 0;
    const { consumer, events } = await fx.consumer(idempotency, { fingerprint: false }, () => {
      runs += 1;
    });
    const storeErrors: { operation: string; error: unknown }[] = [];
    consumer.on('storeError', (e) => storeErrors.push(e));
    fx.publish({ n: 1 }, { messageId: 'newer-1' });
    await waitFor('the delivery settled', () => events.settled.length >= 1);
    expect(events.settled[0]).toMatchObject({
      decision: { action: 'ack', reason: 'duplicate' },
      outcome: 'DUPLICATE',
      key: 'newer-1',
      attempt: 1,
    });
    expect(storeErrors).toEqual([
      {
        queue: fx.queue,
        operation: 'settle',
        error: expect.any(UnreadableResultError),
        source: expect.anything(),
      },
    ]);
    expect(runs).toBe(0);
    await consumer.stop();
    // Acked for good: nothing came back to the queue.
    expect(events.settled).toHaveLength(1);
    expect(await fx.depth()).toBe(0);
  });

  /** A quorum work queue adds `x-delivery-count` to each redelivery: the requeued message is still recognised. */
  async function workQueue(type: 'classic' | 'quorum'): Promise<void> {
    if (type === 'classic') return;
    await fx.channel.deleteQueue(fx.queue);
    await fx.channel.assertQueue(fx.queue, { durable: true, arguments: { 'x-queue-type': 'quorum' } });
  }

  it.each(['classic', 'quorum'] as const)(
    'an unprotected run whose dead-letter publish fails is not run again; the copy lands once the exchange is back (%s work queue)',
    async (type) => {
      await workQueue(type);
      let runs = 0;
      const { consumer, events } = await fx.consumer(
        fx.idempotency(),
        { missingKey: 'process', idempotencyKey: () => undefined },
        () => {
          runs += 1;
          throw new NonRetryableError('bad');
        },
      );
      const { deadLetterExchange, deadLetterQueue, deadLetterRoutingKey } = consumer.topology;
      await fx.channel.deleteExchange(deadLetterExchange);
      fx.publish({ n: 1 });
      await waitFor(
        'two failed dead-letter publishes',
        () => events.settled.filter((e) => e.decision.action === 'requeue').length >= 2,
      );
      await fx.channel.assertExchange(deadLetterExchange, 'direct', { durable: true });
      await fx.channel.bindQueue(deadLetterQueue as string, deadLetterExchange, deadLetterRoutingKey);
      const [dead] = await fx.deadLetters(1);
      expect(dead!.properties.headers![DEAD_LETTER_HEADERS.reason]).toBe('non-retryable');
      expect(runs).toBe(1);
    },
  );

  it.each(['classic', 'quorum'] as const)(
    'a completed unprotected run whose ack was lost is acked, not run again, by its redelivery (%s work queue)',
    async (type) => {
      await workQueue(type);
      const opened: ChannelModel[] = [];
      let runs = 0;
      const { events } = await fx.consumer(
        fx.idempotency(),
        { missingKey: 'process', idempotencyKey: () => undefined },
        async () => {
          runs += 1;
          // The side effect is done; the connection goes away before the ack can leave.
          if (runs === 1) await opened[0]!.close();
        },
        {
          connect: async () => {
            const connection = await connect(fx.amqpUrl);
            opened.push(connection);
            return connection;
          },
          logger: false,
        },
      );
      fx.publish({ n: 1 });
      await waitFor('the redelivery acked', () => acks(events).length === 1, 20_000);
      expect(events.delivery.map((d) => d.redelivered)).toEqual([false, true]);
      expect(runs).toBe(1);
    },
  );
});
