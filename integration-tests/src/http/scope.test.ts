import { randomUUID } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { Idempotency, type IdempotencyLogger, RedisIdempotencyStore } from '@idempotent-consumer/core';
import { createIdempotencyMiddleware, recordIdempotencyError } from '@idempotent-consumer/http/express';
import { fastifyIdempotency } from '@idempotent-consumer/http/fastify';
import express from 'express';
import Fastify, { type FastifyInstance } from 'fastify';
import Redis from 'ioredis';
import { describeWithServices } from '../../support/service';
import { freshKey, post } from './client';
import { FRAMEWORKS, listenExpress } from './servers';

const PROBLEM = 'application/problem+json';

/** A logger that keeps what it is given, as `[level, message]`. */
function recordingLogger(): IdempotencyLogger & { readonly lines: [level: string, message: string][] } {
  const lines: [string, string][] = [];
  const keep = (level: string) => (message: string) => void lines.push([level, message]);
  return { lines, warn: keep('warn'), error: keep('error'), info: keep('info'), debug: keep('debug') };
}

/** A server whose routes answer 201 with the request's scope and the number of handler runs so far. */
interface MountedServer {
  readonly url: string;
  close(): Promise<void>;
}

/**
 * The same routes, mounted below a path on both frameworks (key required): `POST /api/orders/:id/items`
 * (Express: a router at `/api`; Fastify: a plugin with that prefix), `POST /shops/:shop/orders` (a mount
 * path with a parameter), `POST /v1/orders` and `POST /v2/orders` (Express: one router at both), and
 * `POST /admin/orders` (Express: a sub-app). Routing ignores case, as Express does by default.
 */
type StartMounted = (idempotency: Idempotency) => Promise<MountedServer>;

const startMountedExpress: StartMounted = async (idempotency) => {
  let runs = 0;
  const idempotent = createIdempotencyMiddleware({ idempotency }, { required: true });
  const handler: express.RequestHandler = (req, res) => {
    res.status(201).json({ scope: req.idempotency?.scope, n: ++runs });
  };
  const app = express();
  const api = express.Router();
  api.post('/orders/:id/items', express.json(), idempotent, handler);
  app.use('/api', api);
  const shops = express.Router();
  shops.post('/orders', express.json(), idempotent, handler);
  app.use('/shops/:shop', shops);
  const versions = express.Router();
  versions.post('/orders', express.json(), idempotent, handler);
  app.use(['/v1', '/v2'], versions);
  const admin = express();
  admin.post('/orders', express.json(), idempotent, handler);
  admin.use(recordIdempotencyError);
  app.use('/admin', admin);
  app.use(recordIdempotencyError);
  return listenExpress(app);
};

const startMountedFastify: StartMounted = async (idempotency) => {
  let runs = 0;
  const app = Fastify({ routerOptions: { caseSensitive: false } });
  await app.register(fastifyIdempotency, { idempotency, required: true });
  const orders = (path: string) => async (child: FastifyInstance) => {
    child.post(path, async (request, reply) =>
      reply.code(201).send({ scope: request.idempotency?.scope, n: ++runs }),
    );
  };
  await app.register(orders('/orders/:id/items'), { prefix: '/api' });
  await app.register(orders('/orders'), { prefix: '/shops/:shop' });
  await app.register(orders('/orders'), { prefix: '/v1' });
  await app.register(orders('/orders'), { prefix: '/v2' });
  await app.register(orders('/orders'), { prefix: '/admin' });
  await app.listen({ port: 0, host: '127.0.0.1' });
  return { url: `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`, close: () => app.close() };
};

describeWithServices(['redis'], 'HTTP Idempotency-Key scopes on real Redis', ({ redis: redisUrl }) => {
  let redis: Redis;
  beforeAll(() => {
    redis = new Redis(redisUrl);
  });
  afterAll(() => redis.quit());

  /** A runner on a store of its own (`maxKeyBytes` as given), and a logger that records its lines. */
  function runner(maxKeyBytes?: number) {
    const store = new RedisIdempotencyStore(
      { redis },
      { keyPrefix: `http-scope-${randomUUID()}`, maxKeyBytes },
    );
    const logger = recordingLogger();
    return { store, logger, idempotency: new Idempotency({ store, logger }, { leaseMs: 10_000 }) };
  }

  describe.each([
    ['express', startMountedExpress],
    ['fastify', startMountedFastify],
  ] as const)('%s, routes mounted below a path', (_name, start) => {
    let server: MountedServer;
    let store: RedisIdempotencyStore;
    beforeAll(async () => {
      const r = runner();
      store = r.store;
      server = await start(r.idempotency);
    });
    afterAll(async () => {
      await server.close();
      store.close();
    });

    /** Posts `paths` in turn with one key and body: what each answered, and the scope it ran in. */
    async function sameKey(...paths: string[]) {
      const key = freshKey();
      const replies = [];
      for (const path of paths) replies.push(await post(server.url, path, { key, body: { a: 1 } }));
      return replies.map((r) => ({
        status: r.status,
        replayed: r.headers.get('idempotent-replayed') === 'true',
        scope: (r.json as { scope?: string }).scope,
      }));
    }

    it('one key on a mount path in another case (routed to the same route) is one record: the handler ran once (was two); another spelling of the target is 422', async () => {
      const scope = '["POST","/api/orders/:id/items"]';
      // The request target (path and query as sent) is part of the payload fingerprint: the same record,
      // answered 422 for a target spelled otherwise, as for another body.
      const reused = { status: 422, replayed: false, scope: undefined };
      expect(await sameKey('/API/orders/1/items', '/api/orders/1/items', '/Api/Orders/1/Items')).toEqual([
        { status: 201, replayed: false, scope },
        reused,
        reused,
      ]);
      expect(await sameKey('/api/orders/1/items', '/api/orders/1/items')).toEqual([
        { status: 201, replayed: false, scope },
        { status: 201, replayed: true, scope },
      ]);
      const admin = '["POST","/admin/orders"]';
      expect(await sameKey('/ADMIN/orders', '/admin/orders')).toEqual([
        { status: 201, replayed: false, scope: admin },
        reused,
      ]);
    });

    it('the scope is the route template, mount path included, on both frameworks alike', async () => {
      const [shop] = await sameKey('/shops/Acme/orders');
      expect(shop?.scope).toBe('["POST","/shops/:shop/orders"]');
    });

    it('one router mounted at two paths is two routes: one key on each runs twice', async () => {
      expect(await sameKey('/v1/orders', '/v2/orders', '/v2/orders', '/V2/orders')).toEqual([
        { status: 201, replayed: false, scope: '["POST","/v1/orders"]' },
        { status: 201, replayed: false, scope: '["POST","/v2/orders"]' },
        { status: 201, replayed: true, scope: '["POST","/v2/orders"]' },
        { status: 422, replayed: false, scope: undefined },
      ]);
    });
  });

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
        // A server error an operator must see: one `error` line, from the HTTP package (the runner logs no
        // refusal of its caller's request), naming the route, the answer and the part refused. Before: the
        // runner's "claim failed: InvalidKeyError: …" only, which a refused client key wrote too.
        expect(logger.lines).toEqual([
          [
            'error',
            expect.stringMatching(
              /^idempotent-consumer: the idempotency store refused the scope built for POST \/orders .*answered 500 scope-refused.*The scope is \d+ bytes long/,
            ),
          ],
        ]);
        // A key longer than the middleware's maxKeyBytes (255) is the client's: still 400.
        const long = await post(server.url, '/orders', {
          key: `"${'k'.repeat(256)}"`,
          body: { a: 1 },
          tenant,
        });
        expect(long.status).toBe(400);
        expect(long.json).toMatchObject({ type: 'urn:idempotent-consumer:problem:invalid-idempotency-key' });
        expect(logger.lines).toHaveLength(1);
      } finally {
        await server.close();
        store.close();
      }
    });

    it('a key the store refuses (longer than its maxKeyBytes, within the middleware’s) stays 400, and logs nothing: the client’s mistake (was an error line per request)', async () => {
      const { store, logger, idempotency } = runner(64);
      const server = await start(idempotency);
      try {
        for (let i = 0; i < 3; i++) {
          const r = await post(server.url, '/orders', { key: `"${'k'.repeat(100)}-${i}"`, body: { a: 1 } });
          expect(r.status).toBe(400);
          expect(r.json).toMatchObject({ type: 'urn:idempotent-consumer:problem:invalid-idempotency-key' });
        }
        expect(server.calls.get('orders') ?? 0).toBe(0);
        // Before: three `error` lines ("claim failed: InvalidKeyError: The idempotency key is 103 bytes
        // long…"), one per request: any client could write error lines at will.
        expect(logger.lines).toEqual([]);
      } finally {
        await server.close();
        store.close();
      }
    });
  });
});
