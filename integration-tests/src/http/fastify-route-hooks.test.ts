import { randomUUID } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { Idempotency, RedisIdempotencyStore } from '@idempotent-consumer/core';
import { fastifyIdempotency } from '@idempotent-consumer/http/fastify';
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import Redis from 'ioredis';
import { describeWithServices } from '../../support/service';
import { freshKey, post } from './client';

declare module 'fastify' {
  interface FastifyRequest {
    /** Set by the test's authentication hook. */
    user?: string;
  }
}

/**
 * An authentication hook on the route, as `@fastify/auth` is used (`preHandler: app.auth([...])`): a
 * request without `authorization` gets 401; with one, `request.user` is its value.
 */
async function authenticate(request: FastifyRequest, reply: FastifyReply): Promise<void> {
  const user = request.headers.authorization;
  if (!user) return reply.code(401).send({ error: 'unauthenticated' });
  request.user = user;
}

describeWithServices(
  ['redis'],
  'Fastify: the claim comes after the route’s own preHandler hooks',
  ({ redis: url }) => {
    let redis: Redis;
    let idempotency: Idempotency;
    let app: FastifyInstance;
    let base: string;
    const runs: string[] = [];
    const warnings: string[] = [];

    beforeAll(async () => {
      redis = new Redis(url);
      const store = new RedisIdempotencyStore({ redis }, { keyPrefix: `http-route-hooks-${randomUUID()}` });
      const logger = { warn: (message: string) => warnings.push(message), error: () => {}, debug: () => {} };
      idempotency = new Idempotency({ store, logger }, { leaseMs: 10_000, maxAttempts: 2 });
      app = Fastify();
      // A route registered before the plugin: onRoute never sees it, so the instance hook still claims.
      app.post('/early', async () => {
        runs.push('early');
        return { early: true };
      });
      await app.register(fastifyIdempotency, {
        idempotency,
        required: true,
        // The tenant is the authenticated user: only known once the route's hook ran.
        tenant: (request) => request.user,
      });
      app.post('/pay', { preHandler: authenticate }, async (request, reply) => {
        runs.push(`pay ${request.user}`);
        return reply.code(201).send({ paid: true, by: request.user, attempt: request.idempotency?.attempt });
      });
      await app.listen({ port: 0, host: '127.0.0.1' });
      base = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
    });

    afterAll(async () => {
      await app?.close();
      await redis?.quit();
    });

    beforeEach(() => {
      runs.length = 0;
    });

    it('a 401 from the route’s authentication hook is not stored: the retry with credentials runs the handler, on its first attempt', async () => {
      const key = freshKey();
      // Before: the 401 was stored as the key's response, and the retry with credentials got it replayed.
      for (let i = 0; i < 3; i++) {
        const refused = await post(base, '/pay', { key, body: { amount: 5 } });
        expect(refused.status).toBe(401);
        expect(refused.headers.get('idempotent-replayed')).toBeNull();
      }
      const paid = await post(base, '/pay', { key, body: { amount: 5 }, headers: { authorization: 'ann' } });
      expect([paid.status, paid.json]).toEqual([201, { paid: true, by: 'ann', attempt: 1 }]);
      const replay = await post(base, '/pay', {
        key,
        body: { amount: 5 },
        headers: { authorization: 'ann' },
      });
      expect([replay.status, replay.headers.get('idempotent-replayed'), replay.json]).toEqual([
        201,
        'true',
        { paid: true, by: 'ann', attempt: 1 },
      ]);
      expect(runs).toEqual(['pay ann']);
    });

    it('a stored response is not replayed to a request the route’s hook refuses, and the tenant is the authenticated user', async () => {
      const key = freshKey();
      const paid = await post(base, '/pay', { key, body: { amount: 7 }, headers: { authorization: 'ann' } });
      expect(paid.status).toBe(201);
      // Before: the claim ran first and replayed ann's stored 201 to a request without credentials.
      const anonymous = await post(base, '/pay', { key, body: { amount: 7 } });
      expect(anonymous.status).toBe(401);
      // Another user with the same key is another tenant: their own run, not ann's response.
      const bob = await post(base, '/pay', { key, body: { amount: 7 }, headers: { authorization: 'bob' } });
      expect([bob.status, bob.headers.get('idempotent-replayed'), bob.json]).toEqual([
        201,
        null,
        { paid: true, by: 'bob', attempt: 1 },
      ]);
      expect(runs).toEqual(['pay ann', 'pay bob']);
    });

    it('a route registered before the plugin is still covered (claimed by the instance hook)', async () => {
      const key = freshKey();
      const first = await post(base, '/early', { key });
      const again = await post(base, '/early', { key });
      expect([first.status, again.status, again.headers.get('idempotent-replayed')]).toEqual([
        200,
        200,
        'true',
      ]);
      expect(runs).toEqual(['early']);
      const early = warnings.filter((w) =>
        w.includes('POST /early was registered before the idempotency plugin'),
      );
      expect(early).toHaveLength(1);
    });
  },
);

describeWithServices(
  ['redis'],
  'Fastify: an onRoute hook that replaces the route’s preHandler hooks',
  ({ redis: url }) => {
    it('the handler of a route whose claim was dropped fails (500) instead of running unclaimed on every retry', async () => {
      const redis = new Redis(url);
      const store = new RedisIdempotencyStore(
        { redis },
        { keyPrefix: `http-route-replaced-${randomUUID()}` },
      );
      const idempotency = new Idempotency({ store, logger: false }, { leaseMs: 10_000 });
      const app = Fastify({ logger: false });
      try {
        await app.register(fastifyIdempotency, { idempotency, required: true });
        // Another plugin's onRoute hook, registered after ours, that sets preHandler instead of appending.
        app.addHook('onRoute', (routeOptions) => {
          routeOptions.preHandler = async () => {};
        });
        let runs = 0;
        app.post('/pay', async () => {
          runs += 1;
          return { paid: true };
        });
        await app.listen({ port: 0, host: '127.0.0.1' });
        const at = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
        const key = freshKey();
        // Before: both requests ran the handler (200, 200), the key never claimed.
        const first = await post(at, '/pay', { key });
        const second = await post(at, '/pay', { key });
        expect([first.status, second.status, runs]).toEqual([500, 500, 0]);
      } finally {
        await app.close();
        await redis.quit();
      }
    });
  },
);
