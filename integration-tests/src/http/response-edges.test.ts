import { randomUUID } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { Readable } from 'node:stream';
import { gzipSync } from 'node:zlib';
import { createAdaptorServer } from '@hono/node-server';
import { Idempotency, RedisIdempotencyStore } from '@idempotent-consumer/core';
import type { HttpIdempotencyOptions } from '@idempotent-consumer/http';
import { createIdempotencyMiddleware } from '@idempotent-consumer/http/express';
import { fastifyIdempotency } from '@idempotent-consumer/http/fastify';
import { honoIdempotency } from '@idempotent-consumer/http/hono';
import { IdempotencyModule, Idempotent } from '@idempotent-consumer/http/nest';
import { Controller, type INestApplication, Module, Post, Res, StreamableFile } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { ExpressAdapter } from '@nestjs/platform-express';
import { FastifyAdapter } from '@nestjs/platform-fastify';
import express from 'express';
import Fastify, { type FastifyReply } from 'fastify';
import { Hono } from 'hono';
import Redis from 'ioredis';
import { describeWithServices } from '../../support/service';
import { freshKey, post } from './client';
import { incompressibleBytes, listenExpress, webStream } from './servers';

/** A route's handler, written once for both frameworks: what it answers on its `n`th call. */
interface Answer {
  readonly status: number;
  readonly headers?: Record<string, string | string[]>;
  /** The body; a `Readable` is piped (Express) or sent as the payload (Fastify). */
  readonly body: Buffer | string | Readable;
}

interface EdgeServer {
  readonly url: string;
  /** Handler runs so far. */
  runs(): number;
  close(): Promise<void>;
}

type StartEdge = (
  idempotency: Idempotency,
  answer: (n: number) => Answer,
  options?: HttpIdempotencyOptions,
) => Promise<EdgeServer>;

/**
 * Express: `POST /edge` behind an upstream middleware that sets `access-control-allow-origin: *` (as
 * `cors()` does), then `express.json()` and the idempotency middleware (key required).
 */
const startExpress: StartEdge = async (idempotency, answer, options = {}) => {
  let n = 0;
  const app = express();
  app.use((_req, res, next) => {
    res.setHeader('access-control-allow-origin', '*');
    next();
  });
  const idempotent = createIdempotencyMiddleware({ idempotency }, { ...options, required: true });
  app.post('/edge', express.json(), idempotent, (_req, res, next) => {
    const a = answer(++n);
    res.status(a.status);
    for (const [name, value] of Object.entries(a.headers ?? {})) res.setHeader(name, value);
    if (a.body instanceof Readable) {
      a.body.once('error', next);
      a.body.pipe(res);
    } else res.end(a.body);
  });
  return { ...(await listenExpress(app)), runs: () => n };
};

/** Fastify: the same route, with an `onRequest` hook that sets `access-control-allow-origin: *`. */
const startFastify: StartEdge = async (idempotency, answer, options = {}) => {
  let n = 0;
  const app = Fastify();
  app.addHook('onRequest', async (_request, reply) => {
    reply.header('access-control-allow-origin', '*');
  });
  await app.register(fastifyIdempotency, { idempotency, ...options, required: true });
  app.post('/edge', async (_request, reply) => {
    const a = answer(++n);
    reply.code(a.status);
    for (const [name, value] of Object.entries(a.headers ?? {})) reply.header(name, value);
    return reply.send(a.body);
  });
  await app.listen({ port: 0, host: '127.0.0.1' });
  return {
    url: `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`,
    runs: () => n,
    close: () => app.close(),
  };
};

/** Hono: the same route, behind a middleware that sets `access-control-allow-origin: *`. */
const startHono: StartEdge = async (idempotency, answer, options = {}) => {
  let n = 0;
  const app = new Hono();
  app.onError((_error, c) => c.text('Internal Server Error', 500));
  app.use('*', async (c, next) => {
    c.header('access-control-allow-origin', '*');
    await next();
  });
  app.post('/edge', honoIdempotency({ idempotency, ...options, required: true }), (c) => {
    const a = answer(++n);
    for (const [name, value] of Object.entries(a.headers ?? {}))
      for (const v of [value].flat()) c.header(name, v, { append: true });
    const body = a.body instanceof Readable ? webStream(a.body) : a.body;
    return c.body(typeof body === 'string' ? body : (body as Uint8Array<ArrayBuffer>), a.status as 200);
  });
  const server = createAdaptorServer({ fetch: app.fetch });
  server.listen(0, '127.0.0.1');
  await new Promise<void>((resolve) => server.once('listening', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    runs: () => n,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
};

/**
 * NestJS: the same route on either platform, behind a middleware that sets `access-control-allow-origin:
 * *`. A body that is not text is sent as a `StreamableFile`, whose stream error Nest answers 400 by
 * default: this one answers 500, as the other frameworks do.
 */
function startNest(platform: 'express' | 'fastify'): StartEdge {
  return async (idempotency, answer, options = {}) => {
    let n = 0;
    type NestRes = { status(code: number): unknown; header(name: string, value: string | string[]): unknown };
    @Controller()
    class Edge {
      @Post('edge')
      @Idempotent({ required: true })
      edge(@Res({ passthrough: true }) res: NestRes) {
        const a = answer(++n);
        res.status(a.status);
        for (const [name, value] of Object.entries(a.headers ?? {})) res.header(name, value);
        if (typeof a.body === 'string') return a.body;
        const file = a.body instanceof Readable ? new StreamableFile(a.body) : new StreamableFile(a.body);
        file.setErrorHandler((_error, response) => {
          const raw = response as unknown as import('node:http').ServerResponse;
          if (raw.destroyed) return;
          raw.statusCode = 500;
          raw.end('Internal Server Error');
        });
        return file;
      }
    }
    @Module({
      imports: [IdempotencyModule.forRoot({ idempotency, ...options })],
      controllers: [Edge],
    })
    class EdgeModule {}
    const app: INestApplication =
      platform === 'express'
        ? await NestFactory.create(EdgeModule, new ExpressAdapter(), { logger: false })
        : await NestFactory.create(EdgeModule, new FastifyAdapter(), { logger: false });
    app.use((_req: unknown, res: { setHeader(name: string, value: string): void }, next: () => void) => {
      res.setHeader('access-control-allow-origin', '*');
      next();
    });
    await app.listen(0, '127.0.0.1');
    const { port } = app.getHttpServer().address() as AddressInfo;
    return { url: `http://127.0.0.1:${port}`, runs: () => n, close: () => app.close() };
  };
}

const EDGE_FRAMEWORKS: readonly [string, StartEdge][] = [
  ['express', startExpress],
  ['fastify', startFastify],
  ['hono', startHono],
  ['nest-express', startNest('express')],
  ['nest-fastify', startNest('fastify')],
];

describeWithServices(['redis'], 'HTTP Idempotency-Key response edge cases', ({ redis: redisUrl }) => {
  let redis: Redis;
  let store: RedisIdempotencyStore;
  let idempotency: Idempotency;
  beforeAll(() => {
    redis = new Redis(redisUrl);
    store = new RedisIdempotencyStore({ redis }, { keyPrefix: `http-edges-${randomUUID()}` });
    idempotency = new Idempotency({ store, logger: false }, { leaseMs: 10_000, maxAttempts: 5 });
  });
  afterAll(() => {
    store.close();
    return redis.quit();
  });

  /** Starts a server, runs `body` against it, and closes it. */
  async function withServer<T>(
    start: StartEdge,
    answer: (n: number) => Answer,
    options: HttpIdempotencyOptions,
    body: (server: EdgeServer) => Promise<T>,
  ): Promise<T> {
    const server = await start(idempotency, answer, options);
    try {
      return await body(server);
    } finally {
      await server.close();
    }
  }

  /** Runs `body` against a Fastify app with the plugin (key required) and `POST /web` running `handler`. */
  async function withFastifyRoute(
    options: HttpIdempotencyOptions,
    handler: (reply: FastifyReply) => Promise<unknown>,
    body: (url: string) => Promise<void>,
  ): Promise<void> {
    const app = Fastify();
    await app.register(fastifyIdempotency, { idempotency, ...options, required: true });
    app.post('/web', async (_request, reply) => handler(reply));
    await app.listen({ port: 0, host: '127.0.0.1' });
    try {
      await body(`http://127.0.0.1:${(app.server.address() as AddressInfo).port}`);
    } finally {
      await app.close();
    }
  }

  describe.each(EDGE_FRAMEWORKS)('%s', (_name, start) => {
    it('replays two Set-Cookie headers as two header lines when set-cookie is a replay header', async () => {
      const cookies = ['session=abc; Path=/; HttpOnly', 'theme=dark; Path=/'];
      const answer = (): Answer => ({ status: 201, headers: { 'set-cookie': cookies }, body: 'ok' });
      const options = { replayHeaders: ['set-cookie', 'content-type'] };
      await withServer(start, answer, options, async (server) => {
        const key = freshKey();
        const first = await post(server.url, '/edge', { key, body: { a: 1 } });
        expect(first.headers.getSetCookie()).toEqual(cookies);
        const again = await post(server.url, '/edge', { key, body: { a: 1 } });
        expect(again.headers.get('idempotent-replayed')).toBe('true');
        expect(again.headers.getSetCookie()).toEqual(cookies);
        expect(server.runs()).toBe(1);
      });
    });

    it('replays a body the handler content-encoded with its Content-Encoding, so the client can decode it', async () => {
      const json = JSON.stringify({ id: 'order-1', amount: 100 });
      const answer = (): Answer => ({
        status: 201,
        headers: { 'content-type': 'application/json', 'content-encoding': 'gzip' },
        body: gzipSync(json),
      });
      await withServer(start, answer, {}, async (server) => {
        const key = freshKey();
        const first = await post(server.url, '/edge', { key, body: { a: 1 } });
        expect(first.bytes.toString()).toBe(json); // fetch decodes the gzip body
        const again = await post(server.url, '/edge', { key, body: { a: 1 } });
        expect(again.headers.get('idempotent-replayed')).toBe('true');
        expect(again.headers.get('content-encoding')).toBe('gzip');
        expect(again.bytes.toString()).toBe(json);
        expect(server.runs()).toBe(1);
      });
    });

    it('keeps the headers set before the middleware (CORS) on a replay and on a problem answer', async () => {
      const answer = (): Answer => ({ status: 201, headers: { 'content-type': 'text/plain' }, body: 'ok' });
      await withServer(start, answer, {}, async (server) => {
        const key = freshKey();
        const first = await post(server.url, '/edge', { key, body: { a: 1 } });
        expect(first.headers.get('access-control-allow-origin')).toBe('*');
        const again = await post(server.url, '/edge', { key, body: { a: 1 } });
        expect(again.headers.get('idempotent-replayed')).toBe('true');
        expect(again.headers.get('access-control-allow-origin')).toBe('*');
        const reused = await post(server.url, '/edge', { key, body: { a: 2 } });
        expect(reused.status).toBe(422);
        expect(reused.headers.get('access-control-allow-origin')).toBe('*');
      });
    });

    it.each([
      ['a body above maxResponseBytes sent whole', { maxResponseBytes: 1024 }, () => 'x'.repeat(5000)],
      [
        'a body above maxResponseBytes streamed in pieces',
        { maxResponseBytes: 1024 },
        () => Readable.from(Array.from({ length: 5 }, () => Buffer.alloc(1000, 'y'))),
      ],
      [
        "a stored form above the runner's maxResultBytes (onResultTooLarge: 'fail')",
        { runner: true },
        // Bytes that do not deflate: their stored form (base64) passes 1 KiB.
        () => incompressibleBytes(3000),
      ],
    ] as const)(
      'the 500 response-too-large for %s keeps the headers set before the middleware (CORS), never the handler’s (was: all dropped)',
      async (_what, limits, body) => {
        const answer = (): Answer => ({
          status: 201,
          headers: {
            'content-type': 'text/plain',
            location: '/orders/1',
            'cache-control': 'max-age=600',
            'x-handler': 'set by the handler',
          },
          body: body(),
        });
        // A runner whose stored result may be at most 1 KiB, and fails the key above it.
        const runner =
          'runner' in limits
            ? new Idempotency(
                { store, logger: false },
                { leaseMs: 10_000, maxResultBytes: 1024, onResultTooLarge: 'fail' },
              )
            : idempotency;
        const options = 'maxResponseBytes' in limits ? limits : {};
        const server = await start(runner, answer, { ...options, onResponseTooLarge: 'fail' });
        try {
          const key = freshKey();
          const first = await post(server.url, '/edge', { key, body: { a: 1 } });
          expect(first.json).toMatchObject({
            type: 'urn:idempotent-consumer:problem:response-too-large',
            status: 500,
          });
          expect({
            status: first.status,
            cors: first.headers.get('access-control-allow-origin'),
            type: first.headers.get('content-type'),
            location: first.headers.get('location'),
            cacheControl: first.headers.get('cache-control'),
            handler: first.headers.get('x-handler'),
          }).toEqual({
            status: 500,
            cors: '*',
            type: 'application/problem+json',
            location: null,
            cacheControl: null,
            handler: null,
          });
          const retry = await post(server.url, '/edge', { key, body: { a: 1 } });
          expect(retry.status).toBe(409);
          expect(retry.headers.get('access-control-allow-origin')).toBe('*');
          expect(server.runs()).toBe(1);
        } finally {
          await server.close();
        }
      },
    );

    it('a streamed body that fails is a 500 that releases the key: a retry runs again instead of 409 for the lease', async () => {
      const answer = (n: number): Answer => {
        if (n > 1) return { status: 201, headers: { 'content-type': 'text/plain' }, body: 'second' };
        const failing = new Readable({
          read() {
            this.push('partial ');
            this.destroy(new Error('the source failed'));
          },
        });
        return { status: 201, headers: { 'content-type': 'text/plain' }, body: failing };
      };
      await withServer(start, answer, { conflictWaitMs: 0 }, async (server) => {
        const key = freshKey();
        const first = await post(server.url, '/edge', { key, body: { a: 1 } });
        expect(first.status).toBe(500);
        const retry = await post(server.url, '/edge', { key, body: { a: 1 } });
        expect(retry.status).toBe(201);
        expect(retry.bytes.toString()).toBe('second');
        expect(server.runs()).toBe(2);
      });
    });
  });

  it.each([
    [
      'a web ReadableStream',
      () => new Response('{"id":"pay-1","paid":true}').body,
      { status: 201, type: 'application/json', location: '/payments/pay-1' },
    ],
    [
      'a fetch Response (status and headers its own)',
      () =>
        new Response('{"id":"pay-1","paid":true}', {
          status: 201,
          headers: { 'content-type': 'application/json', location: '/payments/pay-1' },
        }),
      { status: 200 },
    ],
  ])(
    'fastify: %s as the payload is stored and replayed whole, with its status and headers (was stored as "[object ...]")',
    async (_what, payload, before: { status: number; type?: string; location?: string }) => {
      let n = 0;
      const handler = async (reply: FastifyReply) => {
        n += 1;
        reply.code(before.status);
        if (before.type) reply.type(before.type);
        if (before.location) reply.header('location', before.location);
        return reply.send(payload());
      };
      await withFastifyRoute({}, handler, async (url) => {
        const key = freshKey();
        const first = await post(url, '/web', { key, body: { a: 1 } });
        expect(first.status).toBe(201);
        expect(first.bytes.toString()).toBe('{"id":"pay-1","paid":true}');
        const again = await post(url, '/web', { key, body: { a: 1 } });
        expect(again.headers.get('idempotent-replayed')).toBe('true');
        expect({
          status: again.status,
          type: again.headers.get('content-type'),
          location: again.headers.get('location'),
          body: again.bytes.toString(),
        }).toEqual({
          status: 201,
          type: 'application/json',
          location: '/payments/pay-1',
          body: '{"id":"pay-1","paid":true}',
        });
        expect(n).toBe(1);
      });
    },
  );

  /** The headers of an answer except those that differ between two answers anyway, or mark a replay. */
  const comparable = (headers: Headers): Record<string, string> =>
    Object.fromEntries(
      [...headers].filter(
        ([name]) => !['date', 'idempotent-replayed', 'keep-alive', 'connection'].includes(name),
      ),
    );

  it.each([
    ['a Node Readable', () => Readable.from([Buffer.from('%PDF-1.7 '), Buffer.from('the bytes')])],
    ['a web ReadableStream', () => new Blob(['%PDF-1.7 ', 'the bytes']).stream()],
    ['a fetch Response of a stream', () => new Response(new Blob(['%PDF-1.7 ', 'the bytes']).stream())],
  ])(
    'fastify: %s sent without a content-type is replayed without one, as it was first sent (was application/octet-stream)',
    async (_what, stream) => {
      let n = 0;
      const handler = async (reply: FastifyReply) => {
        n += 1;
        return reply.code(201).send(stream());
      };
      await withFastifyRoute({}, handler, async (url) => {
        const key = freshKey();
        const first = await post(url, '/web', { key, body: { a: 1 } });
        const again = await post(url, '/web', { key, body: { a: 1 } });
        expect(again.headers.get('idempotent-replayed')).toBe('true');
        expect(first.headers.get('content-type')).toBeNull();
        expect({
          status: again.status,
          headers: comparable(again.headers),
          body: again.bytes.toString(),
        }).toEqual({
          status: first.status,
          headers: comparable(first.headers),
          body: '%PDF-1.7 the bytes',
        });
        expect(n).toBe(1);
      });
    },
  );

  it('fastify: a Response whose body was read already is answered 500 and releases the key: a retry runs again', async () => {
    let n = 0;
    const handler = async (reply: FastifyReply) => {
      n += 1;
      const response = new Response('{"paid":true}', { status: 201 });
      if (n === 1) await response.text();
      return reply.send(response);
    };
    await withFastifyRoute({ conflictWaitMs: 0 }, handler, async (url) => {
      const key = freshKey();
      const first = await post(url, '/web', { key, body: { a: 1 } });
      expect(first.status).toBe(500);
      const retry = await post(url, '/web', { key, body: { a: 1 } });
      expect(retry.status).toBe(201);
      expect(retry.bytes.toString()).toBe('{"paid":true}');
      expect(n).toBe(2);
    });
  });

  it('express: a handler that fails after writing part of its body gets a clean 500 (the error answer alone) and releases the key', async () => {
    let n = 0;
    const app = express();
    const idempotent = createIdempotencyMiddleware({ idempotency }, { required: true });
    app.post('/partial', express.json(), idempotent, (_req, res, next) => {
      n += 1;
      if (n > 1) return void res.status(201).type('text/plain').send('second');
      res.status(201).type('text/plain');
      res.write('partial ');
      next(new Error('failed after writing'));
    });
    // Express' default error handler logs errors outside the `test` environment.
    app.set('env', 'test');
    const server = app.listen(0, '127.0.0.1');
    await new Promise<void>((resolve, reject) => server.once('listening', resolve).once('error', reject));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    try {
      const key = freshKey();
      const first = await post(url, '/partial', { key, body: { a: 1 } });
      expect(first.status).toBe(500);
      // finalhandler's error page, whole (its Content-Length) and nothing before it.
      expect(first.bytes.toString()).toMatch(/^<!DOCTYPE html>[\s\S]*failed after writing[\s\S]*<\/html>\n$/);
      expect(Number(first.headers.get('content-length'))).toBe(first.bytes.length);
      const retry = await post(url, '/partial', { key, body: { a: 1 } });
      expect(retry.status).toBe(201);
      expect(retry.bytes.toString()).toBe('second');
      expect(n).toBe(2);
    } finally {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });
});
