import { createHash } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import type { Idempotency } from '@idempotent-consumer/core';
import type { HttpIdempotencyOptions } from '@idempotent-consumer/http';
import { createIdempotencyMiddleware, recordIdempotencyError } from '@idempotent-consumer/http/express';
import { fastifyIdempotency } from '@idempotent-consumer/http/fastify';
import express from 'express';
import Fastify from 'fastify';

/**
 * The same API on Express and on Fastify, on 127.0.0.1, for the HTTP suites:
 * - `POST /orders` and `POST /orders/:id/items` (key required): 201 with `Location`, the body echoed
 *   with a per-server call number, the fencing token and the attempt;
 * - `POST /optional` (key optional): 200;
 * - `POST /invalid` (key required): 400 with a JSON error;
 * - `POST /flaky` (key required): the first call per key throws (500), later calls answer 201;
 * - `POST /held` (key required): 201 like `/orders`;
 * - `POST /big` (key required): a body of `size` bytes (JSON field), written in 1 KiB chunks, with the
 *   status `status` (JSON field, default 200);
 * - `POST /binary` (key required): 200, `application/octet-stream`, the `size` (JSON field) bytes of
 *   {@link incompressibleBytes}, sent in one piece (not UTF-8, and deflate cannot shrink them).
 * The tenant is the `x-tenant` request header.
 * Express mounts `recordIdempotencyError` after the routes, as the package README says.
 */
export interface TestServer {
  readonly url: string;
  /**
   * Handler runs per route name (`orders`, `items`, `optional`, `invalid`, `flaky`, `held`, `big`,
   * `binary`).
   */
  readonly calls: Map<string, number>;
  /**
   * The next handler run with this `Idempotency-Key` header value (any route) waits for `release()`;
   * `entered` resolves when it starts.
   */
  hold(key: string): { entered: Promise<void>; release: () => void };
  close(): Promise<void>;
}

export type StartServer = (
  idempotency: Idempotency,
  options?: Omit<HttpIdempotencyOptions, 'tenant'>,
) => Promise<TestServer>;

interface Handlers {
  calls: Map<string, number>;
  hold: TestServer['hold'];
  run(
    route: string,
    key: string | undefined,
    body: unknown,
    ctx: { fencingToken?: number; attempt?: number; outcome?: string },
  ): Promise<{ status: number; json: unknown; location?: string }>;
  big(size: number): Buffer[];
}

function handlers(): Handlers {
  const calls = new Map<string, number>();
  const gates = new Map<string, { entered: () => void; released: Promise<void> }>();
  const flaky = new Map<string, number>();
  return {
    calls,
    hold(key) {
      let entered!: () => void;
      let release!: () => void;
      const enteredP = new Promise<void>((r) => {
        entered = r;
      });
      const released = new Promise<void>((r) => {
        release = r;
      });
      gates.set(key, { entered, released });
      return { entered: enteredP, release };
    },
    async run(route, key, body, ctx) {
      const n = (calls.get(route) ?? 0) + 1;
      calls.set(route, n);
      const echo = { n, body, fencingToken: ctx.fencingToken, attempt: ctx.attempt, outcome: ctx.outcome };
      const gate = key === undefined ? undefined : gates.get(key);
      if (gate) {
        gates.delete(key!);
        gate.entered();
        await gate.released;
      }
      if (route === 'flaky' && key) {
        const seen = (flaky.get(key) ?? 0) + 1;
        flaky.set(key, seen);
        if (seen === 1) throw new Error('flaky handler fails its first call');
      }
      if (route === 'invalid') return { status: 400, json: { error: 'invalid order', n } };
      if (route === 'optional') return { status: 200, json: echo };
      return { status: 201, json: echo, location: `/orders/${n}` };
    },
    big(size) {
      const chunks: Buffer[] = [];
      for (let left = size; left > 0; left -= 1024) chunks.push(Buffer.alloc(Math.min(1024, left), 'x'));
      return chunks;
    },
  };
}

const ROUTES = [
  ['orders', '/orders', true],
  ['items', '/orders/:id/items', true],
  ['optional', '/optional', false],
  ['invalid', '/invalid', true],
  ['flaky', '/flaky', true],
  ['held', '/held', true],
] as const;

/**
 * `size` bytes that look random (SHA-256 in counter mode) but are the same on every call, so a suite can
 * compare what it received: not valid UTF-8 (stored as base64) and not deflatable.
 */
export function incompressibleBytes(size: number): Buffer {
  const blocks: Buffer[] = [];
  for (let i = 0; i * 32 < size; i++) blocks.push(createHash('sha256').update(`block ${i}`).digest());
  return Buffer.concat(blocks).subarray(0, size);
}

const keyOf = (headers: Record<string, unknown>) => headers['idempotency-key'] as string | undefined;

/** Starts an Express app on 127.0.0.1: its URL, and a close that ends open connections too. */
export async function listenExpress(app: express.Express): Promise<{ url: string; close(): Promise<void> }> {
  const server = app.listen(0, '127.0.0.1');
  await new Promise<void>((resolve, reject) => server.once('listening', resolve).once('error', reject));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

export const startExpress: StartServer = async (idempotency, options = {}) => {
  const h = handlers();
  const app = express();
  const tenant = (req: express.Request) => req.header('x-tenant');
  const optional = createIdempotencyMiddleware({ idempotency }, { tenant, ...options });
  const required = createIdempotencyMiddleware({ idempotency }, { tenant, ...options, required: true });
  for (const [name, path, isRequired] of ROUTES) {
    app.post(path, express.json(), isRequired ? required : optional, async (req, res) => {
      const r = await h.run(name, keyOf(req.headers), req.body, req.idempotency ?? {});
      if (r.location) res.location(r.location);
      res.status(r.status).json(r.json);
    });
  }
  app.post('/big', express.json(), required, (req, res) => {
    h.calls.set('big', (h.calls.get('big') ?? 0) + 1);
    res.status(Number(req.body.status ?? 200)).type('text/plain');
    for (const chunk of h.big(Number(req.body.size))) res.write(chunk);
    res.end();
  });
  app.post('/binary', express.json(), required, (req, res) => {
    h.calls.set('binary', (h.calls.get('binary') ?? 0) + 1);
    res.type('application/octet-stream').send(incompressibleBytes(Number(req.body.size)));
  });
  app.use(recordIdempotencyError);
  return { ...(await listenExpress(app)), calls: h.calls, hold: h.hold };
};

export const startFastify: StartServer = async (idempotency, options = {}) => {
  const h = handlers();
  const app = Fastify();
  await app.register(fastifyIdempotency, {
    idempotency,
    tenant: (request) => request.headers['x-tenant'] as string | undefined,
    ...options,
  });
  for (const [name, path, isRequired] of ROUTES) {
    app.post(path, { config: { idempotency: { required: isRequired } } }, async (request, reply) => {
      const r = await h.run(name, keyOf(request.headers), request.body, request.idempotency ?? {});
      if (r.location) reply.header('location', r.location);
      return reply.code(r.status).send(r.json);
    });
  }
  app.post('/big', { config: { idempotency: { required: true } } }, async (request, reply) => {
    h.calls.set('big', (h.calls.get('big') ?? 0) + 1);
    const { Readable } = await import('node:stream');
    const body = request.body as { size: number; status?: number };
    return reply
      .code(body.status ?? 200)
      .type('text/plain')
      .send(Readable.from(h.big(Number(body.size))));
  });
  app.post('/binary', { config: { idempotency: { required: true } } }, async (request, reply) => {
    h.calls.set('binary', (h.calls.get('binary') ?? 0) + 1);
    const size = Number((request.body as { size: number }).size);
    return reply.type('application/octet-stream').send(incompressibleBytes(size));
  });
  await app.listen({ port: 0, host: '127.0.0.1' });
  return {
    url: `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`,
    calls: h.calls,
    hold: h.hold,
    close: () => app.close(),
  };
};

/** Both frameworks, for `describe.each`. */
export const FRAMEWORKS: readonly [string, StartServer][] = [
  ['express', startExpress],
  ['fastify', startFastify],
];
