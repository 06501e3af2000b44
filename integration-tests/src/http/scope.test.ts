import { randomUUID } from 'node:crypto';
import { Idempotency, type IdempotencyLogger, RedisIdempotencyStore } from '@idempotent-consumer/core';
import Redis from 'ioredis';
import { describeWithServices } from '../../support/service';
import { freshKey, post } from './client';
import { FRAMEWORKS } from './servers';

const PROBLEM = 'application/problem+json';

/** A logger that keeps what it is given. */
function recordingLogger(): IdempotencyLogger & { readonly errors: string[] } {
  const errors: string[] = [];
  return { errors, warn: () => undefined, error: (message) => void errors.push(message) };
}

describeWithServices(['redis'], 'HTTP Idempotency-Key scopes on real Redis', ({ redis: redisUrl }) => {
  let redis: Redis;
  beforeAll(() => {
    redis = new Redis(redisUrl);
  });
  afterAll(() => redis.quit());

  /** A runner on a store of its own (`maxKeyBytes` as given), and a logger that records its errors. */
  function runner(maxKeyBytes?: number) {
    const store = new RedisIdempotencyStore(
      { redis },
      { keyPrefix: `http-scope-${randomUUID()}`, maxKeyBytes },
    );
    const logger = recordingLogger();
    return { store, logger, idempotency: new Idempotency({ store, logger }, { leaseMs: 10_000 }) };
  }

  describe.each(FRAMEWORKS)('%s', (_name, start) => {
    it('a scope longer than the store takes (server-built: route and tenant) is a logged 500, not a 400 for the client', async () => {
      const { store, logger, idempotency } = runner();
      const server = await start(idempotency);
      try {
        const tenant = 't'.repeat(600); // the store takes 512 bytes by default
        const r = await post(server.url, '/orders', { key: freshKey(), body: { a: 1 }, tenant });
        expect(r.status).toBe(500);
        expect(r.headers.get('content-type')).toContain(PROBLEM);
        expect(r.json).toMatchObject({ type: 'urn:idempotent-consumer:problem:scope-refused', status: 500 });
        expect(server.calls.get('orders') ?? 0).toBe(0);
        // The runner logs the store's refusal (a store error), naming the part refused.
        expect(logger.errors).toEqual([
          expect.stringMatching(/InvalidKeyError: The scope is \d+ bytes long/),
        ]);
        // A key longer than the middleware's maxKeyBytes (255) is the client's: still 400.
        const long = await post(server.url, '/orders', {
          key: `"${'k'.repeat(256)}"`,
          body: { a: 1 },
          tenant,
        });
        expect(long.status).toBe(400);
        expect(long.json).toMatchObject({ type: 'urn:idempotent-consumer:problem:invalid-idempotency-key' });
      } finally {
        await server.close();
        store.close();
      }
    });

    it('a key the store refuses (longer than its maxKeyBytes, within the middleware’s) stays 400', async () => {
      const { store, idempotency } = runner(64);
      const server = await start(idempotency);
      try {
        const r = await post(server.url, '/orders', { key: `"${'k'.repeat(100)}"`, body: { a: 1 } });
        expect(r.status).toBe(400);
        expect(r.json).toMatchObject({ type: 'urn:idempotent-consumer:problem:invalid-idempotency-key' });
        expect(server.calls.get('orders') ?? 0).toBe(0);
      } finally {
        await server.close();
        store.close();
      }
    });
  });
});
