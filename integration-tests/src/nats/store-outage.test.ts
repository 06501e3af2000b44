import { Idempotency, RedisIdempotencyStore } from '@idempotent-consumer/core';
import Redis from 'ioredis';
import { waitFor } from '../../support/net';
import { RedisServer } from '../../support/redis-server';
import { describeWithServices } from '../../support/service';
import { acks, NatsFixture } from './fixture';

jest.setTimeout(60_000);

describeWithServices(['nats', 'redis'], 'nats adapter: Redis killed and restarted mid-run', (urls) => {
  const fx = NatsFixture.eachTest(urls);
  let server: RedisServer;
  let storeRedis: Redis;
  beforeAll(async () => {
    // Every write on disk before it is answered: records outlive the SIGKILL.
    server = await RedisServer.start({ args: ['--appendonly', 'yes', '--appendfsync', 'always'] });
    storeRedis = new Redis(server.url, {
      maxRetriesPerRequest: 0,
      enableOfflineQueue: false,
      retryStrategy: () => 100,
    });
  });
  afterAll(async () => {
    storeRedis.disconnect();
    await server.dispose();
  });

  it('acks nothing that did not complete while Redis is down, stops pulling, and resumes once it answers', async () => {
    const store = new RedisIdempotencyStore(
      { redis: storeRedis },
      { keyPrefix: fx.prefix, commandTimeoutMs: 300 },
    );
    const idempotency = new Idempotency({ store }, { leaseMs: 1500, writeAttempts: 2 });
    const started: { key: string; at: number }[] = [];
    const done = new Set<string>();
    const { consumer, events } = await fx.consumer(idempotency, {}, async ({ key }) => {
      started.push({ key: key!, at: performance.now() });
      await new Promise((resolve) => setTimeout(resolve, 30));
      await fx.effect(key!);
      done.add(key!);
    });
    // An ack of a key whose handler had not returned, at the moment of the ack.
    const acksBeforeRun: string[] = [];
    consumer.on('settled', (e) => {
      if (e.decision.action === 'ack' && !done.has(e.key!)) acksBeforeRun.push(e.key!);
    });
    const total = 30;
    for (let i = 0; i < total; i++) await fx.publish(`pay-${i}`);
    await waitFor('a third handled', async () => Object.keys(await fx.effects()).length >= total / 3);

    await server.stop();
    await waitFor('pulling paused', () => consumer.paused, 10_000);
    expect(events.storeUnavailable).toHaveLength(1);
    // Handlers that had started may end meanwhile; then nothing runs, and the rest waits in JetStream.
    await new Promise((resolve) => setTimeout(resolve, 500));
    const quietFrom = performance.now();
    const settledBefore = events.settled.length;
    await new Promise((resolve) => setTimeout(resolve, 1500));
    // Not pulling: no message is delivered, nak'ed and delivered again meanwhile.
    expect(events.settled.length).toBe(settledBefore);
    expect(started.filter((s) => s.at > quietFrom)).toEqual([]);
    const waiting = await fx.pending();
    expect(waiting.pending + waiting.ackPending).toBeGreaterThan(0);
    const naked = events.settled.filter((e) => e.decision.action === 'nak');
    expect(naked.every((e) => 'reason' in e.decision && e.decision.reason === 'store-unavailable')).toBe(
      true,
    );

    await server.restart();
    await waitFor('pulling resumed', () => !consumer.paused, 10_000);
    await waitFor(
      'every message acked',
      () => new Set(acks(events).map((e) => e.key)).size === total,
      20_000,
    );
    const effects = await fx.effects();
    expect(Object.keys(effects)).toHaveLength(total);
    expect(Object.values(effects).filter((n) => n !== 1)).toEqual([]);
    expect(acksBeforeRun).toEqual([]);
    expect(events.storeRecovered).toHaveLength(1);
    await waitFor('nothing pending', async () => (await fx.pending()).ackPending === 0);
  });

  it('naks a message whose claim meets Redis down, pulls nothing more, and runs it once Redis answers', async () => {
    const store = new RedisIdempotencyStore(
      { redis: storeRedis },
      { keyPrefix: fx.prefix, commandTimeoutMs: 300 },
    );
    const idempotency = new Idempotency({ store }, { leaseMs: 1500 });
    const { consumer, events } = await fx.consumer(idempotency, {}, async ({ key }) => fx.effect(key!));
    await fx.publish('pay-a');
    await waitFor('pay-a acked', () => acks(events).length === 1);
    await server.stop();
    await fx.publish('pay-b');
    await waitFor('pay-b nak-ed', () => events.settled.length === 2, 10_000);
    expect(events.settled[1]).toMatchObject({
      key: 'pay-b',
      decision: { action: 'nak', reason: 'store-unavailable' },
      source: { deliveryCount: 1 },
    });
    expect(consumer.paused).toBe(true);
    await server.restart();
    await waitFor('pay-b acked', () => acks(events).length === 2, 10_000);
    // Its first claim wrote nothing: the run that completes it is the record's first attempt.
    expect(events.settled[2]).toMatchObject({ key: 'pay-b', outcome: 'ACQUIRED', attempt: 1 });
    expect(await fx.effects()).toEqual({ 'pay-a': 1, 'pay-b': 1 });
  });
});
