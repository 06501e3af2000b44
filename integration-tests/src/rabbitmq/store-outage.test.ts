import { RedisIdempotencyStore } from '@idempotent-consumer/core';
import { createIdempotentConsumer } from '@idempotent-consumer/rabbitmq';
import Redis from 'ioredis';
import { settlesWithin, waitFor } from '../../support/net';
import { type RedisServer, useFailFastRedis } from '../../support/redis-server';
import { describeWithServices } from '../../support/service';
import { acks, FAST, pause, RabbitFixture, requeues } from './fixture';

const MESSAGES = 30;

describeWithServices(['rabbitmq', 'redis'], 'rabbitmq adapter: the store stops mid-run', (urls) => {
  const fx = RabbitFixture.eachTest(urls);
  const privateRedis = useFailFastRedis();
  let server: RedisServer;
  let storeRedis: Redis;
  beforeEach(() => {
    ({ server, redis: storeRedis } = privateRedis);
  });

  /** How the store becomes unavailable and comes back: stopped, or full (it refuses every write with OOM). */
  const outages = {
    stopped: { begin: () => server.stop(), end: () => server.restart() },
    'full (maxmemory, noeviction: OOM)': {
      begin: () =>
        withAdmin((admin) => admin.config('SET', 'maxmemory-policy', 'noeviction', 'maxmemory', '1')),
      end: () => withAdmin((admin) => admin.config('SET', 'maxmemory', '0')),
    },
  };
  const withAdmin = async (body: (admin: Redis) => Promise<unknown>) => {
    const admin = new Redis(server.url);
    try {
      await body(admin);
    } finally {
      admin.disconnect();
    }
  };

  it.each(Object.keys(outages) as (keyof typeof outages)[])(
    'the store %s: fails closed: pauses, acks nothing it did not complete, resumes, loses nothing, no double effect',
    async (kind) => {
      const outage = outages[kind];
      const store = new RedisIdempotencyStore(
        { redis: storeRedis },
        { keyPrefix: fx.prefix, commandTimeoutMs: 300 },
      );
      const idempotency = fx.idempotency({ leaseMs: 1000 }, store);
      const handlerRan = new Set<string>();
      const { consumer, events } = await fx.consumer(idempotency, { prefetch: 2 }, async ({ key }) => {
        handlerRan.add(key!);
        await pause(40);
        await fx.effect(key!);
      });
      for (let i = 0; i < MESSAGES; i++) fx.publish({ amount: i }, { messageId: `p-${i}` });

      await waitFor('a few acks', () => acks(events).length >= 5);
      await outage.begin();
      await waitFor('the consumer to pause', () => events.storeUnavailable.length >= 1);
      expect(consumer.state).toBe('paused');
      // Each in-flight delivery settles: its claim refused (requeued, `store-unavailable`), or its handler
      // completed and acked, whether Redis took its COMPLETED write or not (a write the store refused all
      // `writeAttempts` pauses the consumer too, and is written once Redis answers).
      await waitFor('the in-flight deliveries to settle', () => consumer.inFlight === 0, 15_000);

      // While the store is down, hold an interval and watch that nothing new runs or is acked blindly.
      const ranBefore = handlerRan.size;
      const ackedBefore = acks(events).length;
      await pause(1200);
      expect(handlerRan.size).toBe(ranBefore);
      for (const e of acks(events).slice(ackedBefore)) expect(handlerRan.has(e.key!)).toBe(true);
      // Every message not acked is still in RabbitMQ (ready, or unacked in flight).
      expect(await fx.depth()).toBeGreaterThanOrEqual(MESSAGES - acks(events).length - consumer.inFlight);
      expect(events.retryScheduled).toHaveLength(0);
      expect(events.deadLettered).toHaveLength(0);

      await outage.end();
      await waitFor('the consumer to resume', () => events.storeRecovered.length >= 1, 10_000);
      const effects = await fx.allDone(events, MESSAGES, 15_000);
      expect(Object.values(effects).every((count) => count === '1')).toBe(true);
      await consumer.stop();
      expect(await fx.depth()).toBe(0);
      expect(events.deadLettered).toHaveLength(0);
    },
    30_000,
  );

  it('a work queue deleted while paused ends like one deleted while running: closed, one cancelled event, no reconnect loop', async () => {
    const store = new RedisIdempotencyStore(
      { redis: storeRedis },
      { keyPrefix: fx.prefix, commandTimeoutMs: 300 },
    );
    const idempotency = fx.idempotency({ leaseMs: 1000 }, store);
    const { consumer, events } = await fx.consumer(idempotency, {}, async () => {});
    await server.stop();
    fx.publish({ amount: 1 }, { messageId: 'p-deleted' });
    await waitFor('the consumer to pause', () => events.storeUnavailable.length >= 1);
    await waitFor('the delivery to be requeued', () => requeues(events).length >= 1);
    expect(consumer.state).toBe('paused');
    await fx.channel.deleteQueue(fx.queue);
    await server.restart();

    // The resume's basic.consume meets the missing queue (404): the consumer is closed, as when the broker
    // cancels a running consumer, instead of retrying the topology check until stop().
    await waitFor('the cancelled event', () => events.cancelled.length === 1, 10_000);
    expect(consumer.state).toBe('closed');
    expect(consumer.reconnecting).toBe(false);
    expect(events.brokerError.filter((e) => e.operation === 'connect')).toEqual([]);
    expect(events.reconnected).toEqual([]);
    await consumer.stop();
    expect(events.cancelled).toHaveLength(1);
  }, 30_000);

  it('stop() during a start() whose Redis client is still connecting (Redis accepts, never answers) resolves without waiting for it', async () => {
    await server.withStoreStillConnecting(async (idempotency) => {
      const consumer = createIdempotentConsumer(
        { idempotency, connection: fx.connection, logger: false },
        { ...FAST, queue: fx.queue },
        () => {},
      );
      let started = false;
      consumer.on('started', () => {
        started = true;
      });
      const starting = consumer.start();
      // The SIGTERM of a rolling deploy during that start: stop() waits for the step under way, here the
      // store check. It waited for that check's wait for the connecting client (5 s), then the PING's own
      // timeout (500 ms), though nothing was opened yet and start() was to give up anyway.
      const stopped = await settlesWithin('stop()', consumer.stop(), 2_500);
      expect(stopped).toEqual({ status: 'fulfilled', value: { abandoned: 0 } });
      await expect(starting).resolves.toBeUndefined();
      expect(started).toBe(false);
      expect(consumer.state).toBe('stopped');
    });
  });
});
