import { randomUUID } from 'node:crypto';
import { buildRecordKey, Idempotency, RedisIdempotencyStore } from '@idempotent-consumer/core';
import { httpScope } from '@idempotent-consumer/http';
import Redis from 'ioredis';
import { describeWithServices } from '../../support/service';
import { freshKey, post } from './client';
import { FRAMEWORKS, startExpress, startFastify, type TestServer } from './servers';

const PROBLEM = 'application/problem+json';

describeWithServices(['redis'], 'HTTP Idempotency-Key on real Redis', ({ redis: redisUrl }) => {
  let redis: Redis;
  let store: RedisIdempotencyStore;
  let idempotency: Idempotency;
  const keyPrefix = `http-test-${randomUUID()}`;
  beforeAll(() => {
    redis = new Redis(redisUrl, { enableAutoPipelining: true });
    store = new RedisIdempotencyStore({ redis }, { keyPrefix });
    idempotency = new Idempotency({ store }, { leaseMs: 10_000, maxAttempts: 5 });
  });
  afterAll(() => {
    // The store's subscriber connection (conflict waits) would outlive the test by a second otherwise.
    store.close();
    return redis.quit();
  });

  describe.each(FRAMEWORKS)('%s', (_name, start, traits) => {
    let server: TestServer;
    beforeAll(async () => {
      server = await start(idempotency);
    });
    afterAll(() => server.close());

    it('replays a 201 with identical status, headers worth replaying and bytes, marked Idempotent-Replayed', async () => {
      const key = freshKey();
      const first = await post(server.url, '/orders', { key, body: { amount: 100, currency: 'EUR' } });
      expect(first.status).toBe(201);
      expect(first.headers.get('idempotent-replayed')).toBeNull();
      expect(first.json).toMatchObject({ fencingToken: expect.any(Number), attempt: 1 });
      const again = await post(server.url, '/orders', { key, body: { amount: 100, currency: 'EUR' } });
      expect(again.status).toBe(201);
      expect(again.headers.get('idempotent-replayed')).toBe('true');
      expect(again.bytes.equals(first.bytes)).toBe(true);
      expect(again.headers.get('location')).toBe(first.headers.get('location'));
      expect(again.headers.get('content-type')).toBe(first.headers.get('content-type'));
      expect(server.calls.get('orders')).toBe((first.json as { n: number }).n);
    });

    it('a retry whose stored response this version cannot decode (a newer version stored it) gets a 500; the handler does not run again', async () => {
      const key = freshKey();
      const first = await post(server.url, '/orders', { key, body: { amount: 7 } });
      expect(first.status).toBe(201);
      const before = server.calls.get('orders');
      // The stored response rewritten in an encoding this version does not know.
      const recordKey = buildRecordKey(keyPrefix, {
        scope: httpScope('POST', '/orders', undefined),
        key: JSON.parse(key),
      });
      expect(await redis.hset(recordKey, 'r', 'x{"v":2}')).toBe(0);
      const again = await post(server.url, '/orders', { key, body: { amount: 7 } });
      expect(again.status).toBe(500);
      expect(again.headers.get('idempotent-replayed')).toBeNull();
      expect(server.calls.get('orders')).toBe(before);
      // The record stays COMPLETED: an instance that can decode it replays it.
      expect(await redis.hget(recordKey, 's')).toBe('C');
    });

    it('stores a 4xx: the replay has the same status and bytes, the handler ran once', async () => {
      const key = freshKey();
      const first = await post(server.url, '/invalid', { key, body: { x: 1 } });
      expect(first.status).toBe(400);
      const before = server.calls.get('invalid');
      const again = await post(server.url, '/invalid', { key, body: { x: 1 } });
      expect(again.status).toBe(400);
      expect(again.headers.get('idempotent-replayed')).toBe('true');
      expect(again.bytes.equals(first.bytes)).toBe(true);
      expect(server.calls.get('invalid')).toBe(before);
    });

    it('answers 422 to the same key with another body, but replays the same body with its keys reordered', async () => {
      const key = freshKey();
      const first = await post(server.url, '/orders', { key, rawBody: '{"amount":100,"currency":"EUR"}' });
      expect(first.status).toBe(201);
      const reordered = await post(server.url, '/orders', {
        key,
        rawBody: '{ "currency": "EUR", "amount": 100 }',
      });
      expect(reordered.status).toBe(201);
      expect(reordered.headers.get('idempotent-replayed')).toBe('true');
      expect(reordered.bytes.equals(first.bytes)).toBe(true);
      const changed = await post(server.url, '/orders', { key, body: { amount: 101, currency: 'EUR' } });
      expect(changed.status).toBe(422);
      expect(changed.headers.get('content-type')).toContain(PROBLEM);
      expect(changed.json).toMatchObject({
        type: 'urn:idempotent-consumer:problem:idempotency-key-reused',
        status: 422,
        title: expect.any(String),
        detail: expect.any(String),
      });
    });

    // The holder answers only once all 50 requests have been claimed, so the other 49 really race it.
    async function race(target: TestServer) {
      const key = freshKey();
      const hold = target.hold(key);
      let claims = 0;
      const allClaimed = new Promise<void>((resolve) => {
        const onOutcome = (e: { key: string }) => {
          if (e.key === key.slice(1, -1) && ++claims >= 50) {
            idempotency.off('outcome', onOutcome);
            resolve();
          }
        };
        idempotency.on('outcome', onOutcome);
      });
      const replies = Array.from({ length: 50 }, () =>
        post(target.url, '/held', { key, body: { race: true } }),
      );
      await hold.entered;
      await allClaimed;
      hold.release();
      const all = await Promise.all(replies);
      expect(target.calls.get('held')).toBe(1);
      const original = all.filter((r) => r.status === 201 && r.headers.get('idempotent-replayed') === null);
      expect(original).toHaveLength(1);
      return { all, original: original[0]! };
    }

    it('50 parallel requests with one key, no wait: the handler runs once, the 49 others get 409 with Retry-After', async () => {
      const target = await start(idempotency, { conflictWaitMs: 0 });
      try {
        const { all } = await race(target);
        const conflicts = all.filter((r) => r.status === 409);
        expect(conflicts).toHaveLength(49);
        for (const r of conflicts) {
          expect(r.headers.get('content-type')).toContain(PROBLEM);
          expect(Number(r.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
          expect(r.json).toMatchObject({ type: 'urn:idempotent-consumer:problem:request-in-progress' });
        }
      } finally {
        await target.close();
      }
    });

    it('50 parallel requests with one key, waiting for the holder: the handler runs once, the 49 others replay its answer', async () => {
      const target = await start(idempotency, { conflictWaitMs: 60_000 });
      try {
        const { all, original } = await race(target);
        const replays = all.filter((r) => r.headers.get('idempotent-replayed') === 'true');
        expect(replays).toHaveLength(49);
        for (const r of replays) {
          expect(r.status).toBe(201);
          expect(r.bytes.equals(original.bytes)).toBe(true);
        }
      } finally {
        await target.close();
      }
    });

    it('a request that meets one in flight waits; when that one answers 500 (released) it runs itself', async () => {
      const key = freshKey();
      const body = { amount: 7 };
      const hold = server.hold(key);
      const conflicted = new Promise<void>((resolve) => {
        const onOutcome = (e: { key: string; outcome: string }) => {
          if (e.key === key.slice(1, -1) && e.outcome === 'CONFLICT') {
            idempotency.off('outcome', onOutcome);
            resolve();
          }
        };
        idempotency.on('outcome', onOutcome);
      });
      const first = post(server.url, '/flaky', { key, body });
      await hold.entered;
      const second = post(server.url, '/flaky', { key, body });
      await conflicted;
      hold.release();
      expect((await first).status).toBe(500);
      const r = await second;
      expect(r.status).toBe(201);
      expect(r.headers.get('idempotent-replayed')).toBeNull();
      expect(r.json).toMatchObject({ attempt: 2, fencingToken: expect.any(Number) });
    });

    it('a thrown error (500) releases the key: a retry runs the handler again as attempt 2 and is then replayed', async () => {
      const key = freshKey();
      const body = { amount: 5 };
      const failed = await post(server.url, '/flaky', { key, body });
      expect(failed.status).toBe(500);
      const retried = await post(server.url, '/flaky', { key, body });
      expect(retried.status).toBe(201);
      expect(retried.headers.get('idempotent-replayed')).toBeNull();
      expect(retried.json).toMatchObject({ attempt: 2, fencingToken: expect.any(Number) });
      const replayed = await post(server.url, '/flaky', { key, body });
      expect(replayed.headers.get('idempotent-replayed')).toBe('true');
      expect(replayed.bytes.equals(retried.bytes)).toBe(true);
    });

    it('the same key on two routes and for two tenants is four records', async () => {
      const key = freshKey();
      const body = { same: true };
      const a = await post(server.url, '/orders', { key, body, tenant: 'acct-a' });
      const b = await post(server.url, '/orders', { key, body, tenant: 'acct-b' });
      const items = await post(server.url, '/orders/7/items', { key, body, tenant: 'acct-a' });
      const otherId = await post(server.url, '/orders/8/items', { key, body, tenant: 'acct-a' });
      const none = await post(server.url, '/orders', { key, body });
      for (const r of [a, b, items, none]) {
        expect(r.status).toBe(201);
        expect(r.headers.get('idempotent-replayed')).toBeNull();
      }
      // The scope is the route template, and the request target (path and query) is part of the payload:
      // the key reused on /orders/8/items is 422, not a replay of /orders/7/items (whose order 8 never got).
      expect(otherId.status).toBe(422);
      expect(otherId.json).toMatchObject({ type: expect.stringContaining('idempotency-key-reused') });
      expect(new Set([a, b, items, none].map((r) => (r.json as { n: number }).n)).size).toBe(4);
    });

    it('a retry whose target is spelled otherwise (query order, percent-encoding) is still the same request: replayed', async () => {
      const key = freshKey();
      const body = { amount: 100 };
      const first = await post(server.url, '/orders?b=x%2Cy&a=1', { key, body });
      const retried = await post(server.url, '/orders?a=1&b=x,y', { key, body });
      expect(first.status).toBe(201);
      expect(retried.headers.get('idempotent-replayed')).toBe('true');
      expect(retried.bytes.equals(first.bytes)).toBe(true);
    });

    it('the same key and body with another query string is 422, not a replay of the first answer', async () => {
      const key = freshKey();
      const body = { amount: 100 };
      const before = server.calls.get('orders') ?? 0;
      const dryRun = await post(server.url, '/orders?dryRun=true', { key, body });
      const real = await post(server.url, '/orders', { key, body });
      const again = await post(server.url, '/orders?dryRun=true', { key, body });
      expect(dryRun.status).toBe(201);
      expect(real.status).toBe(422);
      expect(again.headers.get('idempotent-replayed')).toBe('true');
      expect(server.calls.get('orders')).toBe(before + 1);
    });

    it('a Structured Field string and the same key sent bare are one record', async () => {
      const id = randomUUID();
      const quoted = await post(server.url, '/orders', { key: `"${id}"`, body: { q: 1 } });
      const bare = await post(server.url, '/orders', { key: id, body: { q: 1 } });
      expect(quoted.status).toBe(201);
      expect(bare.headers.get('idempotent-replayed')).toBe('true');
    });

    it.each([
      ['missing', undefined, 'missing-idempotency-key'],
      ['empty', '', 'invalid-idempotency-key'],
      ['an empty string', '""', 'invalid-idempotency-key'],
      ['overlong', `"${'k'.repeat(256)}"`, 'invalid-idempotency-key'],
      ['two keys', '"a", "b"', 'invalid-idempotency-key'],
      ['a broken string', '"unterminated', 'invalid-idempotency-key'],
      ['spaces', 'two words', 'invalid-idempotency-key'],
    ])('a %s key is answered 400 without running the handler', async (_what, key, slug) => {
      const before = server.calls.get('orders') ?? 0;
      const r = await post(server.url, '/orders', { key, body: { k: 1 } });
      expect(r.status).toBe(400);
      expect(r.headers.get('content-type')).toContain(PROBLEM);
      expect(r.json).toMatchObject({ type: `urn:idempotent-consumer:problem:${slug}`, status: 400 });
      expect(server.calls.get('orders') ?? 0).toBe(before);
    });

    if (!traits.fingerprintsAnyMediaType) {
      it('a body of a media type the route does not parse is answered 415 (its payload cannot be fingerprinted)', async () => {
        const before = server.calls.get('orders') ?? 0;
        const r = await post(server.url, '/orders', {
          key: freshKey(),
          rawBody: 'amount=1',
          headers: { 'content-type': 'text/csv' },
        });
        expect(r.status).toBe(415);
        expect(server.calls.get('orders') ?? 0).toBe(before);
      });
    } else {
      it('a body of any media type is fingerprinted as its bytes: the same bytes are replayed, others answered 422', async () => {
        const key = freshKey();
        const csv = { 'content-type': 'text/csv' };
        const first = await post(server.url, '/orders', { key, rawBody: 'amount=1', headers: csv });
        expect(first.status).toBe(201);
        expect(first.json).toMatchObject({ body: 'amount=1' });
        const before = server.calls.get('orders');
        const again = await post(server.url, '/orders', { key, rawBody: 'amount=1', headers: csv });
        expect(again.headers.get('idempotent-replayed')).toBe('true');
        expect(again.bytes.equals(first.bytes)).toBe(true);
        const other = await post(server.url, '/orders', { key, rawBody: 'amount=2', headers: csv });
        expect(other.status).toBe(422);
        expect(server.calls.get('orders')).toBe(before);
      });
    }

    it('a route that does not require a key runs every request without one', async () => {
      const before = server.calls.get('optional') ?? 0;
      const [a, b] = [await post(server.url, '/optional'), await post(server.url, '/optional')];
      expect([a.status, b.status]).toEqual([200, 200]);
      expect(server.calls.get('optional')).toBe(before + 2);
      expect(a.json).toMatchObject({ n: before + 1 });
    });
  });
  it('an Express and a Fastify instance, each with its own runner and Redis connection, share one key: 60 requests, one handler run', async () => {
    const second = new Redis(redisUrl, { enableAutoPipelining: true });
    const secondStore = new RedisIdempotencyStore({ redis: second }, { keyPrefix });
    const secondRunner = new Idempotency({ store: secondStore });
    const servers = [
      await startExpress(idempotency, { conflictWaitMs: 0 }),
      await startFastify(secondRunner, { conflictWaitMs: 0 }),
    ];
    try {
      const key = freshKey();
      const holds = servers.map((s) => s.hold(key));
      const replies = Array.from({ length: 60 }, (_, i) =>
        post(servers[i % 2]!.url, '/held', { key, body: { instances: 2 } }),
      );
      await Promise.race(holds.map((h) => h.entered));
      // The holder answers only after the 59 others were answered (409, no wait).
      let answered = 0;
      await new Promise<void>((resolve) => {
        for (const r of replies) void r.then(() => ++answered === 59 && resolve());
      });
      for (const h of holds) h.release();
      const all = await Promise.all(replies);
      expect(servers.reduce((n, s) => n + (s.calls.get('held') ?? 0), 0)).toBe(1);
      expect(all.filter((r) => r.status === 201)).toHaveLength(1);
      expect(all.filter((r) => r.status === 409)).toHaveLength(59);
    } finally {
      await Promise.all(servers.map((s) => s.close()));
      secondStore.close();
      second.disconnect();
    }
  });
});
