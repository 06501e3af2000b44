import { Idempotency, type IdempotencyOptions, RedisIdempotencyStore } from '@idempotent-consumer/core';
import Redis from 'ioredis';
import { RedisServer } from '../../support/redis-server';
import { describeWithServices } from '../../support/service';
import { freshKey, post } from './client';
import { FRAMEWORKS } from './servers';

// Outages on a private redis-server this suite starts, so stopping it disturbs no other suite.
describeWithServices(['redis'], 'HTTP Idempotency-Key with Redis stopped', () => {
  let redisServer: RedisServer;
  let redis: Redis;
  beforeAll(async () => {
    redisServer = await RedisServer.start();
    redis = new Redis(redisServer.url, { maxRetriesPerRequest: 1, retryStrategy: () => 50 });
  });
  afterAll(async () => {
    redis.disconnect();
    await redisServer.dispose();
  });
  afterEach(() => redisServer.restart());

  const runner = (options: IdempotencyOptions = {}) =>
    new Idempotency(
      { store: new RedisIdempotencyStore({ redis }, { keyPrefix: 'http-outage', commandTimeoutMs: 300 }) },
      { leaseMs: 5_000, writeAttempts: 2, ...options },
    );

  describe.each(FRAMEWORKS)('%s', (_name, start) => {
    it('Redis down at the claim: 503 problem with Retry-After, the handler does not run; 201 once Redis is back', async () => {
      const server = await start(runner(), { storeUnavailableRetryAfterMs: 2_500 });
      try {
        const key = freshKey();
        await redisServer.stop();
        const down = await post(server.url, '/orders', { key, body: { a: 1 } });
        expect(down.status).toBe(503);
        expect(down.headers.get('retry-after')).toBe('3');
        expect(down.headers.get('content-type')).toContain('application/problem+json');
        expect(down.json).toMatchObject({
          type: 'urn:idempotent-consumer:problem:store-unavailable',
          status: 503,
        });
        expect(server.calls.get('orders')).toBeUndefined();
        await redisServer.restart();
        const up = await post(server.url, '/orders', { key, body: { a: 1 } });
        expect(up.status).toBe(201);
        expect(server.calls.get('orders')).toBe(1);
      } finally {
        await server.close();
      }
    });

    it('Redis stopped while the handler runs: the handler completed, so its 201 is still sent', async () => {
      const idempotency = runner();
      const unrecorded = new Promise<boolean>((resolve) =>
        idempotency.once('completed', (e) => resolve(e.recorded)),
      );
      const server = await start(idempotency);
      try {
        const key = freshKey();
        const hold = server.hold(key);
        const reply = post(server.url, '/orders', { key, body: { a: 2 } });
        await hold.entered;
        await redisServer.stop();
        hold.release();
        const r = await reply;
        expect(r.status).toBe(201);
        expect(r.headers.get('idempotent-replayed')).toBeNull();
        expect(await unrecorded).toBe(false);
      } finally {
        await server.close();
      }
    });

    it('Redis down with storeFailureMode open: the handler runs unprotected (fencing token 0)', async () => {
      const server = await start(runner({ storeFailureMode: 'open' }));
      try {
        await redisServer.stop();
        const r = await post(server.url, '/orders', { key: freshKey(), body: { a: 3 } });
        expect(r.status).toBe(201);
        expect(r.json).toMatchObject({ outcome: 'UNPROTECTED', fencingToken: 0, attempt: 0 });
      } finally {
        await server.close();
      }
    });
  });
});
