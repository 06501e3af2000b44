import 'reflect-metadata';
import { createHash } from 'node:crypto';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Readable } from 'node:stream';
import { createAdaptorServer } from '@hono/node-server';
import type { HandlerContext, Idempotency } from '@idempotent-consumer/core';
import type { HttpIdempotencyOptions } from '@idempotent-consumer/http';
import { createIdempotencyMiddleware, recordIdempotencyError } from '@idempotent-consumer/http/express';
import { fastifyIdempotency } from '@idempotent-consumer/http/fastify';
import { honoIdempotency, type IdempotencyVariables } from '@idempotent-consumer/http/hono';
import { IdempotencyContext, IdempotencyModule, Idempotent } from '@idempotent-consumer/http/nest';
import {
  Body,
  Controller,
  type INestApplication,
  Module,
  Post,
  Req,
  Res,
  StreamableFile,
} from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { ExpressAdapter } from '@nestjs/platform-express';
import { FastifyAdapter } from '@nestjs/platform-fastify';
import express from 'express';
import Fastify from 'fastify';
import { Hono } from 'hono';

/**
 * The same API on Express, Fastify, Hono (on `@hono/node-server`) and NestJS (on its Express and Fastify
 * platforms), on 127.0.0.1, for the HTTP suites:
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

/**
 * A web `ReadableStream` of a Node stream, pulled as it is read and destroyed when cancelled (Node's
 * `Readable.toWeb` throws "Controller is already closed" from a stream event after a cancel).
 */
export function webStream(readable: Readable): ReadableStream<Uint8Array> {
  const chunks = readable[Symbol.asyncIterator]();
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      try {
        const next = await chunks.next();
        if (next.done) controller.close();
        else controller.enqueue(typeof next.value === 'string' ? Buffer.from(next.value) : next.value);
      } catch (error) {
        controller.error(error);
      }
    },
    cancel() {
      readable.destroy();
    },
  });
}

/** Starts an Express app on 127.0.0.1: its URL, and a close that ends open connections too. */
export async function listenExpress(app: express.Express): Promise<{ url: string; close(): Promise<void> }> {
  return listenNode(app.listen(0, '127.0.0.1'));
}

/** Waits for a Node server listening on 127.0.0.1: its URL, and a close that ends open connections too. */
async function listenNode(server: Server): Promise<{ url: string; close(): Promise<void> }> {
  if (!server.listening) server.listen(0, '127.0.0.1');
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

export const startHono: StartServer = async (idempotency, options = {}) => {
  const h = handlers();
  const app = new Hono<{ Variables: IdempotencyVariables }>();
  // Hono's default error handler logs the error; the flaky route's is expected.
  app.onError((_error, c) => c.text('Internal Server Error', 500));
  const tenant = (c: { req: { header(name: string): string | undefined } }) => c.req.header('x-tenant');
  const optional = honoIdempotency({ idempotency, tenant, ...options });
  const required = honoIdempotency({ idempotency, tenant, ...options, required: true });
  for (const [name, path, isRequired] of ROUTES) {
    app.post(path, isRequired ? required : optional, async (c) => {
      // A body that is not JSON is echoed as text (the fetch binding fingerprints any media type).
      const body = await c.req.json().catch(() => c.req.text());
      const r = await h.run(name, c.req.header('idempotency-key'), body, c.get('idempotency') ?? {});
      if (r.location) c.header('location', r.location);
      return c.json(r.json, r.status as 200);
    });
  }
  app.post('/big', required, async (c) => {
    h.calls.set('big', (h.calls.get('big') ?? 0) + 1);
    const body = (await c.req.json()) as { size: number; status?: number };
    const stream = webStream(Readable.from(h.big(Number(body.size))));
    return c.body(stream, (body.status ?? 200) as 200, { 'content-type': 'text/plain; charset=utf-8' });
  });
  app.post('/binary', required, async (c) => {
    h.calls.set('binary', (h.calls.get('binary') ?? 0) + 1);
    const size = Number(((await c.req.json()) as { size: number }).size);
    return c.body(new Uint8Array(incompressibleBytes(size)), 200, {
      'content-type': 'application/octet-stream',
    });
  });
  const server = createAdaptorServer({ fetch: app.fetch }) as Server;
  return { ...(await listenNode(server)), calls: h.calls, hold: h.hold };
};

/** A NestJS app with the suites' routes, on its Express or Fastify platform. */
async function startNest(
  platform: 'express' | 'fastify',
  idempotency: Idempotency,
  options: Omit<HttpIdempotencyOptions, 'tenant'>,
): Promise<TestServer> {
  const h = handlers();
  type NestReq = {
    headers: Record<string, string | string[] | undefined>;
    route?: { path: string };
    routeOptions?: { url: string };
  };
  /** Status and headers through `@Res({ passthrough: true })`: Express `res` and Fastify `reply` alike. */
  type NestRes = { status(code: number): unknown; header(name: string, value: string): unknown };
  const answer = async (name: string, req: NestReq, res: NestRes, body: unknown, claim?: HandlerContext) => {
    const r = await h.run(name, keyOf(req.headers), body, claim ?? {});
    if (r.location) res.header('location', r.location);
    res.status(r.status);
    return r.json;
  };

  /** The route name of a request: its template (Express `req.route.path`, Fastify `routeOptions.url`). */
  const nameOf = (req: NestReq) => {
    const template = req.route?.path ?? req.routeOptions?.url;
    return ROUTES.find(([, path]) => path === template)![0];
  };

  @Controller()
  class Routes {
    @Post(ROUTES.filter(([, , isRequired]) => isRequired).map(([, path]) => path))
    @Idempotent({ required: true })
    required(
      @Req() req: NestReq,
      @Res({ passthrough: true }) res: NestRes,
      @Body() body: unknown,
      @IdempotencyContext() claim?: HandlerContext,
    ) {
      return answer(nameOf(req), req, res, body, claim);
    }

    @Post('optional')
    @Idempotent({ required: false })
    optional(
      @Req() req: NestReq,
      @Res({ passthrough: true }) res: NestRes,
      @Body() body: unknown,
      @IdempotencyContext() claim?: HandlerContext,
    ) {
      return answer('optional', req, res, body, claim);
    }

    @Post('big')
    @Idempotent({ required: true })
    big(
      @Res({ passthrough: true }) res: NestRes & { type?: unknown },
      @Body() body: { size: number; status?: number },
    ) {
      h.calls.set('big', (h.calls.get('big') ?? 0) + 1);
      res.status(body.status ?? 200);
      res.header('content-type', 'text/plain; charset=utf-8');
      return new StreamableFile(Readable.from(h.big(Number(body.size))));
    }

    @Post('binary')
    @Idempotent({ required: true })
    binary(@Res({ passthrough: true }) res: NestRes, @Body() body: { size: number }) {
      h.calls.set('binary', (h.calls.get('binary') ?? 0) + 1);
      res.status(200);
      res.header('content-type', 'application/octet-stream');
      return new StreamableFile(incompressibleBytes(Number(body.size)));
    }
  }

  @Module({
    imports: [
      IdempotencyModule.forRoot({
        idempotency,
        tenant: (req) => req.headers['x-tenant'] as string | undefined,
        ...options,
      }),
    ],
    controllers: [Routes],
  })
  class AppModule {}

  const app: INestApplication =
    platform === 'express'
      ? await NestFactory.create(AppModule, new ExpressAdapter(), { logger: false })
      : await NestFactory.create(AppModule, new FastifyAdapter(), { logger: false });
  await app.listen(0, '127.0.0.1');
  const { port } = app.getHttpServer().address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}`, calls: h.calls, hold: h.hold, close: () => app.close() };
}

export const startNestExpress: StartServer = (idempotency, options = {}) =>
  startNest('express', idempotency, options);

export const startNestFastify: StartServer = (idempotency, options = {}) =>
  startNest('fastify', idempotency, options);

/**
 * What a binding does that the others do not, for the few tests that differ: a fetch binding (Hono)
 * fingerprints a body of any media type as its bytes, so it never answers 415.
 */
export interface Traits {
  readonly fingerprintsAnyMediaType: boolean;
}

/** Every framework, for `describe.each`: its name, how to start it, and its traits. */
export const FRAMEWORKS: readonly [string, StartServer, Traits][] = [
  ['express', startExpress, { fingerprintsAnyMediaType: false }],
  ['fastify', startFastify, { fingerprintsAnyMediaType: false }],
  ['hono', startHono, { fingerprintsAnyMediaType: true }],
  ['nest-express', startNestExpress, { fingerprintsAnyMediaType: false }],
  ['nest-fastify', startNestFastify, { fingerprintsAnyMediaType: false }],
];
