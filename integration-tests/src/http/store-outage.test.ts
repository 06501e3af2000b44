import { Idempotency, type IdempotencyOptions, RedisIdempotencyStore } from '@idempotent-consumer/core';
import Redis from 'ioredis';
import { waitFor } from '../../support/net';
import { RedisProxy } from '../../support/redis-proxy';
import { RedisServer } from '../../support/redis-server';
import { describeWithServices } from '../../support/service';
import { freshKey, post, type Reply } from './client';
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
        // The store sends nothing until its client has reconnected (a request before then is a 503 too).
        await waitFor('the store client to reconnect', () => redis.status === 'ready');
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

// The package README's own setup (`new Redis(url)`: ioredis's defaults, its offline queue on) through a
// proxy that refuses or drops. Before, the claims of refused requests waited in ioredis's offline queue (or
// were resent after the reconnect, or delivered late by the network) and were written after the 503: their
// keys were held IN_PROGRESS for a lease nobody ran, the retry got 409, then ran ACQUIRED_STALE attempt 2.
describeWithServices(
  ['redis'],
  'HTTP: a request refused while Redis was down runs at once when retried',
  () => {
    let redisServer: RedisServer;
    let proxy: RedisProxy;
    beforeAll(async () => {
      redisServer = await RedisServer.start();
      proxy = await RedisProxy.start(redisServer.port);
    });
    afterAll(async () => {
      await proxy?.close();
      await redisServer?.dispose();
    });
    afterEach(() => proxy.forward());

    const OUTAGE_MS = 2_000;
    const cases = FRAMEWORKS.flatMap(([name, start]) =>
      (['refused', 'dropped'] as const).map((kind) => [name, kind, start] as const),
    );

    it.each(cases)(
      '%s, packets %s for 2 s: every refused request, retried 1 s after Redis answers, runs at once (ACQUIRED, attempt 1)',
      async (_name, kind, start) => {
        const redis = new Redis(proxy.url);
        redis.on('error', () => {});
        const store = new RedisIdempotencyStore(
          { redis },
          { keyPrefix: 'http-retry', commandTimeoutMs: 500 },
        );
        const server = await start(new Idempotency({ store, logger: false }));
        const sent: { key: string; reply: Promise<Reply> }[] = [];
        const send = () => {
          const key = freshKey();
          sent.push({ key, reply: post(server.url, '/orders', { key, body: { key } }) });
        };
        try {
          await waitFor('the store client', () => redis.status === 'ready');
          const traffic = setInterval(send, 20);
          await new Promise((r) => setTimeout(r, 200));
          // One claim surely on its way when the outage begins (a reset then leaves it for ioredis to resend).
          proxy.drop();
          send();
          await waitFor('a claim on its way', () => proxy.heldBytes > 0);
          if (kind === 'refused') proxy.refuse();
          await new Promise((r) => setTimeout(r, OUTAGE_MS));
          proxy.forward();
          clearInterval(traffic);
          // Redis answers: the client reconnected (after a reset) and a request's claim was answered.
          await waitFor('the store client to reconnect', () => redis.status === 'ready', 10_000);
          const probe = await post(server.url, '/orders', { key: freshKey(), body: {} });
          expect(probe.status).toBe(201);
          const answeredAt = Date.now();
          const replies = await Promise.all(sent.map(async (s) => ({ key: s.key, reply: await s.reply })));
          const refused = replies.filter((r) => r.reply.status === 503);
          expect(refused.length).toBeGreaterThan(0);
          for (const r of refused) expect(r.reply.headers.get('retry-after')).toBe('1');
          await new Promise((r) => setTimeout(r, Math.max(0, answeredAt + 1_000 - Date.now())));
          const retries = await Promise.all(
            refused.map((r) => post(server.url, '/orders', { key: r.key, body: { key: r.key } })),
          );
          expect(
            retries.map((r) => [
              r.status,
              (r.json as { outcome?: string; attempt?: number })?.outcome,
              (r.json as { attempt?: number })?.attempt,
            ]),
          ).toEqual(refused.map(() => [201, 'ACQUIRED', 1]));
        } finally {
          await server.close();
          redis.disconnect();
        }
      },
      30_000,
    );
  },
);
