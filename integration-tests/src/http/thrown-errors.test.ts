import { randomUUID } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { createAdaptorServer } from '@hono/node-server';
import { Idempotency, NonRetryableError, RedisIdempotencyStore } from '@idempotent-consumer/core';
import { honoIdempotency } from '@idempotent-consumer/http/hono';
import { IdempotencyModule, Idempotent } from '@idempotent-consumer/http/nest';
import { BadRequestException, Controller, type INestApplication, Module, Post } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { ExpressAdapter } from '@nestjs/platform-express';
import { FastifyAdapter } from '@nestjs/platform-fastify';
import { Hono } from 'hono';
import Redis from 'ioredis';
import { describeWithServices } from '../../support/service';
import { freshKey, post } from './client';

/** What `POST /fail` does on its `n`th run: answers `{ n }` with 201, or throws. */
type Run = (n: number) => unknown;

interface Running {
  readonly url: string;
  runs(): number;
  close(): Promise<void>;
}

/** Hono: `POST /fail` behind the middleware (key required); thrown errors go to Hono's error handler. */
async function startHono(idempotency: Idempotency, run: Run): Promise<Running> {
  let n = 0;
  const app = new Hono();
  app.onError((error, c) =>
    error instanceof BadRequestException ? c.text('bad', 400) : c.text('Internal Server Error', 500),
  );
  app.post('/fail', honoIdempotency({ idempotency, required: true }), (c) => c.json(run(++n) as object, 201));
  const server = createAdaptorServer({ fetch: app.fetch });
  server.listen(0, '127.0.0.1');
  await new Promise<void>((resolve) => server.once('listening', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    runs: () => n,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/** NestJS: `POST /fail` marked `@Idempotent({ required: true })`; thrown errors go to Nest's filter. */
function startNest(platform: 'express' | 'fastify') {
  return async (idempotency: Idempotency, run: Run): Promise<Running> => {
    let n = 0;
    @Controller()
    class Fail {
      @Post('fail')
      @Idempotent({ required: true })
      fail() {
        return run(++n);
      }
    }
    @Module({ imports: [IdempotencyModule.forRoot({ idempotency })], controllers: [Fail] })
    class FailModule {}
    const app: INestApplication =
      platform === 'express'
        ? await NestFactory.create(FailModule, new ExpressAdapter(), { logger: false })
        : await NestFactory.create(FailModule, new FastifyAdapter(), { logger: false });
    await app.listen(0, '127.0.0.1');
    const { port } = app.getHttpServer().address() as AddressInfo;
    return { url: `http://127.0.0.1:${port}`, runs: () => n, close: () => app.close() };
  };
}

const BINDINGS: readonly [string, (idempotency: Idempotency, run: Run) => Promise<Running>][] = [
  ['hono', startHono],
  ['nest-express', startNest('express')],
  ['nest-fastify', startNest('fastify')],
];

describeWithServices(['redis'], 'HTTP handlers that throw (Hono, NestJS)', ({ redis: redisUrl }) => {
  let redis: Redis;
  let store: RedisIdempotencyStore;
  let idempotency: Idempotency;
  beforeAll(() => {
    redis = new Redis(redisUrl);
    store = new RedisIdempotencyStore({ redis }, { keyPrefix: `http-thrown-${randomUUID()}` });
    idempotency = new Idempotency({ store, logger: false }, { leaseMs: 10_000, maxAttempts: 5 });
  });
  afterAll(() => {
    store.close();
    return redis.quit();
  });

  /** Starts a server, posts to `/fail` twice with one key, closes it: both statuses, the retry, the runs. */
  async function twice(start: (typeof BINDINGS)[number][1], run: Run) {
    const server = await start(idempotency, run);
    try {
      const key = freshKey();
      const first = await post(server.url, '/fail', { key, body: { a: 1 } });
      const retry = await post(server.url, '/fail', { key, body: { a: 1 } });
      return { first, retry, runs: server.runs() };
    } finally {
      await server.close();
    }
  }

  describe.each(BINDINGS)('%s', (_name, start) => {
    it('a NonRetryableError answered 500 records the key FAILED: a retry gets 409 idempotency-key-failed and does not run', async () => {
      const { first, retry, runs } = await twice(start, () => {
        throw new NonRetryableError('card declined for good');
      });
      expect(first.status).toBe(500);
      expect(retry.status).toBe(409);
      expect(retry.json).toMatchObject({ type: 'urn:idempotent-consumer:problem:idempotency-key-failed' });
      expect(runs).toBe(1);
    });

    it('a retryable error answered 500 releases the key: the retry runs again and succeeds', async () => {
      const { first, retry, runs } = await twice(start, (n) => {
        if (n === 1) throw new Error('the database was busy');
        return { n };
      });
      expect(first.status).toBe(500);
      expect(retry.status).toBe(201);
      expect(retry.json).toEqual({ n: 2 });
      expect(runs).toBe(2);
    });

    it('an error answered 4xx completes the key with that answer: the retry gets it replayed', async () => {
      const { first, retry, runs } = await twice(start, () => {
        throw new BadRequestException('the order is invalid');
      });
      expect(first.status).toBe(400);
      expect(retry.status).toBe(400);
      expect(retry.headers.get('idempotent-replayed')).toBe('true');
      expect(retry.bytes.equals(first.bytes)).toBe(true);
      expect(runs).toBe(1);
    });
  });
});
