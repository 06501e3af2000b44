import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { PassThrough, Readable } from 'node:stream';
import { Idempotency, NonRetryableError, RedisIdempotencyStore } from '@idempotent-consumer/core';
import type { HttpIdempotencyOptions } from '@idempotent-consumer/http';
import { createIdempotencyMiddleware, recordIdempotencyError } from '@idempotent-consumer/http/express';
import { fastifyIdempotency } from '@idempotent-consumer/http/fastify';
import express from 'express';
import Fastify, { type FastifyReply } from 'fastify';
import Redis from 'ioredis';
import { failingStream } from '../../../packages/http/test/failing-stream';
import { describeWithServices } from '../../support/service';
import { freshKey, post } from './client';
import { listenExpress } from './servers';

interface Running {
  readonly url: string;
  close(): Promise<void>;
}

/**
 * An Express app on 127.0.0.1 with `POST /fail`: `express.json()`, the idempotency middleware (key
 * required) and `handler`, then `recordIdempotencyError` when `record` is true, then Express' own error
 * handler (finalhandler, quiet in the `test` environment).
 */
async function startExpress(
  idempotency: Idempotency,
  handler: express.RequestHandler,
  options: HttpIdempotencyOptions<express.Request> & { record: boolean },
): Promise<Running> {
  const { record, ...httpOptions } = options;
  const app = express();
  app.set('env', 'test');
  const idempotent = createIdempotencyMiddleware({ idempotency }, { ...httpOptions, required: true });
  app.post('/fail', express.json(), idempotent, handler);
  if (record) app.use(recordIdempotencyError);
  return listenExpress(app);
}

/** A Fastify app on 127.0.0.1 with the plugin (key required) and `POST /fail` running `handler`. */
async function startFastify(
  idempotency: Idempotency,
  handler: (reply: FastifyReply) => unknown,
  options: HttpIdempotencyOptions = {},
): Promise<Running> {
  const app = Fastify();
  await app.register(fastifyIdempotency, { idempotency, ...options, required: true });
  app.post('/fail', async (_request, reply) => handler(reply));
  await app.listen({ port: 0, host: '127.0.0.1' });
  return { url: `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`, close: () => app.close() };
}

describeWithServices(
  ['redis'],
  'HTTP handlers that fail or answer past the capture',
  ({ redis: redisUrl }) => {
    let redis: Redis;
    let store: RedisIdempotencyStore;
    let idempotency: Idempotency;
    beforeAll(() => {
      redis = new Redis(redisUrl);
      store = new RedisIdempotencyStore({ redis }, { keyPrefix: `http-failures-${randomUUID()}` });
      idempotency = new Idempotency({ store, logger: false }, { leaseMs: 10_000, maxAttempts: 5 });
    });
    afterAll(() => {
      store.close();
      return redis.quit();
    });

    /** Runs `body` against a started server, then closes it. */
    async function using<T>(started: Promise<Running>, body: (url: string) => Promise<T>): Promise<T> {
      const server = await started;
      try {
        return await body(server.url);
      } finally {
        await server.close();
      }
    }

    describe('express, recordIdempotencyError', () => {
      const failures: [string, (error: Error) => express.RequestHandler][] = [
        [
          'a synchronous throw',
          (error) => () => {
            throw error;
          },
        ],
        ['next(error)', (error) => (_req, _res, next) => next(error)],
        [
          'an async handler that rejects',
          (error) => async () => {
            await Promise.resolve();
            throw error;
          },
        ],
      ];

      it.each(failures)(
        'a NonRetryableError from %s records the key FAILED: a retry gets 409 idempotency-key-failed and does not run',
        async (_how, fail) => {
          let runs = 0;
          const handler = fail(new NonRetryableError('card declined for good'));
          const counted: express.RequestHandler = (req, res, next) => {
            runs += 1;
            return handler(req, res, next);
          };
          await using(startExpress(idempotency, counted, { record: true }), async (url) => {
            const key = freshKey();
            const first = await post(url, '/fail', { key, body: { a: 1 } });
            expect(first.status).toBe(500);
            const retry = await post(url, '/fail', { key, body: { a: 1 } });
            expect(retry.status).toBe(409);
            expect(retry.json).toMatchObject({
              type: 'urn:idempotent-consumer:problem:idempotency-key-failed',
            });
            expect(runs).toBe(1);
          });
        },
      );

      it('a retryable error still releases the key: a retry runs again', async () => {
        let runs = 0;
        const handler: express.RequestHandler = (_req, res, next) => {
          runs += 1;
          if (runs === 1) return next(new Error('the database was busy'));
          res.status(201).type('text/plain').send('second');
        };
        await using(startExpress(idempotency, handler, { record: true }), async (url) => {
          const key = freshKey();
          expect((await post(url, '/fail', { key, body: { a: 1 } })).status).toBe(500);
          const retry = await post(url, '/fail', { key, body: { a: 1 } });
          expect(retry.status).toBe(201);
          expect(retry.bytes.toString()).toBe('second');
          expect(runs).toBe(2);
        });
      });

      it('pass-through: a handler that fails after its body passed the cap and started streaming releases the key (was held while the process lives)', async () => {
        let runs = 0;
        const handler: express.RequestHandler = (_req, res, next) => {
          runs += 1;
          res.status(200).type('text/plain');
          if (runs > 1) return void res.send('second');
          for (let i = 0; i < 10; i++) res.write(Buffer.alloc(1024, 'x'));
          next(new Error('failed while streaming'));
        };
        const options = {
          record: true,
          maxResponseBytes: 4096,
          onResponseTooLarge: 'pass-through' as const,
          conflictWaitMs: 10_000,
        };
        // Express cannot answer an error once the body went out: it destroys the connection.
        await using(startExpress(idempotency, handler, options), expectCutOffThenRunAgain);
        expect(runs).toBe(2);
      });
    });

    describe.each([
      ['without recordIdempotencyError', false],
      ['with recordIdempotencyError', true],
    ])('express, %s', (_name, record) => {
      it('a handler that set 500, wrote part of its body and failed: the client gets the error answer alone, the key is released', async () => {
        let runs = 0;
        const handler: express.RequestHandler = (_req, res, next) => {
          runs += 1;
          if (runs > 1) return void res.status(201).type('text/plain').send('second');
          res.status(500).type('text/plain');
          res.write('partial ');
          next(new Error('failed after writing'));
        };
        await using(startExpress(idempotency, handler, { record }), async (url) => {
          const key = freshKey();
          const first = await post(url, '/fail', { key, body: { a: 1 } });
          expect(first.status).toBe(500);
          // finalhandler's error page, whole (its Content-Length) and nothing before it.
          expect(first.bytes.toString()).toMatch(
            /^<!DOCTYPE html>[\s\S]*failed after writing[\s\S]*<\/html>\n$/,
          );
          expect(Number(first.headers.get('content-length'))).toBe(first.bytes.length);
          const retry = await post(url, '/fail', { key, body: { a: 1 } });
          expect(retry.status).toBe(201);
          expect(runs).toBe(2);
        });
      });
    });

    describe('express, a handler that answers twice (a second res.json, a missing return)', () => {
      it("the first answer goes out whole under its own status and headers and is replayed (was sent with the second answer's status and Content-Length: the client waited for the rest until the keep-alive timeout closed the connection, then failed)", async () => {
        const handler: express.RequestHandler = (_req, res) => {
          res.status(201).json({ a: 1 });
          // Without the middleware this throws ERR_HTTP_HEADERS_SENT: the first answer went out.
          res.status(400).json({ error: 'a second answer, longer than the first' });
        };
        await using(startExpress(idempotency, handler, { record: false }), expectFirstAnswerReplayed);
      });
    });

    describe('fastify, a handler that answers twice', () => {
      const answers: [string, (reply: FastifyReply) => unknown][] = [
        [
          'a second reply.send',
          (reply) => {
            reply.code(201).send({ a: 1 });
            return reply.code(400).send({ error: 'a second answer, longer than the first' });
          },
        ],
        [
          'reply.send, then a different returned value',
          (reply) => {
            reply.code(201).send({ a: 1 });
            return { error: 'a second answer, longer than the first' };
          },
        ],
      ];

      it.each(answers)(
        '%s: the first answer goes out under its own status and is the one stored and replayed; the second is dropped, as Fastify drops it without the plugin (FST_ERR_REP_ALREADY_SENT) (was sent while the first was being stored: the client got the second answer, retries the first)',
        async (_how, answer) => {
          let runs = 0;
          const handler = (reply: FastifyReply) => {
            runs += 1;
            return answer(reply);
          };
          // conflictWaitMs: a retry that finds the key still in progress waits for the first request's outcome.
          const options = { conflictWaitMs: 10_000 };
          await using(startFastify(idempotency, handler, options), expectFirstAnswerReplayed);
          expect(runs).toBe(1);
        },
      );
    });

    it('fastify: an async handler that fails right after reply.send has its error logged, as Fastify logs it without the plugin (was dropped as a second answer: only a "forgot to return reply" warning)', async () => {
      const lines: { level: number; msg: string; err?: { message: string } }[] = [];
      const app = Fastify({
        logger: { level: 'warn', stream: { write: (line: string) => void lines.push(JSON.parse(line)) } },
      });
      await app.register(fastifyIdempotency, { idempotency, required: true });
      app.post('/fail', async (_request, reply) => {
        reply.code(201).send({ paid: true });
        await Promise.resolve();
        throw new Error('the audit write failed after the answer');
      });
      await app.listen({ port: 0, host: '127.0.0.1' });
      try {
        const first = await post(`http://127.0.0.1:${(app.server.address() as AddressInfo).port}`, '/fail', {
          key: freshKey(),
          body: { a: 1 },
        });
        expect(first.status).toBe(201);
        expect(lines).toContainEqual(
          expect.objectContaining({
            level: 50,
            err: expect.objectContaining({ message: 'the audit write failed after the answer' }),
          }),
        );
      } finally {
        await app.close();
      }
    });

    describe('fastify, pass-through', () => {
      const options = {
        maxResponseBytes: 4096,
        onResponseTooLarge: 'pass-through' as const,
        conflictWaitMs: 10_000,
      };

      it('a body stream that fails after it passed the cap and started streaming releases the key: a retry runs again, as on Express (was completed: retries got 409 response-not-stored)', async () => {
        let runs = 0;
        const handler = (reply: FastifyReply) => {
          runs += 1;
          reply.type('text/plain');
          return runs > 1 ? 'second' : failingStream(new Error('failed while streaming'));
        };
        await using(startFastify(idempotency, handler, options), expectCutOffThenRunAgain);
        expect(runs).toBe(2);
      });

      it('a body stream that fails with a NonRetryableError records the key FAILED: a retry gets 409 idempotency-key-failed and does not run', async () => {
        let runs = 0;
        const handler = (reply: FastifyReply) => {
          runs += 1;
          reply.type('text/plain');
          return failingStream(new NonRetryableError('the export was cancelled for good'));
        };
        await using(startFastify(idempotency, handler, options), async (url) => {
          const key = freshKey();
          await expect(post(url, '/fail', { key, body: { a: 1 } })).rejects.toThrow();
          const retry = await post(url, '/fail', { key, body: { a: 1 } });
          expect(retry.status).toBe(409);
          expect(retry.json).toMatchObject({
            type: 'urn:idempotent-consumer:problem:idempotency-key-failed',
          });
          expect(runs).toBe(1);
        });
      });
    });

    describe('fastify, a body stream destroyed without an error (was waited for forever: the request hung, the key was held)', () => {
      /** A handler whose first run returns a stream of 8 KiB destroyed without an error, as `status`. */
      const closingThenSecond = (status: number) => {
        let runs = 0;
        const handler = (reply: FastifyReply) => {
          runs += 1;
          reply.type('text/plain');
          if (runs > 1) return 'second';
          reply.code(status);
          return failingStream(undefined);
        };
        return { handler, runs: () => runs };
      };

      it('within the cap: answered 500 through the error handler, the key released: a retry runs again', async () => {
        const { handler, runs } = closingThenSecond(200);
        await using(startFastify(idempotency, handler, { conflictWaitMs: 10_000 }), async (url) => {
          const key = freshKey();
          expect((await post(url, '/fail', { key, body: { a: 1 } })).status).toBe(500);
          await expectRetryRunsAgain(url, key);
        });
        expect(runs()).toBe(2);
      });

      it('already closed when the handler returns it: answered 500, the key released: a retry runs again', async () => {
        let runs = 0;
        const handler = async (reply: FastifyReply) => {
          runs += 1;
          reply.type('text/plain');
          if (runs > 1) return 'second';
          const body = new PassThrough();
          body.destroy();
          await once(body, 'close');
          return body;
        };
        await using(startFastify(idempotency, handler, { conflictWaitMs: 10_000 }), async (url) => {
          const key = freshKey();
          expect((await post(url, '/fail', { key, body: { a: 1 } })).status).toBe(500);
          await expectRetryRunsAgain(url, key);
        });
        expect(runs).toBe(2);
      });

      it.each([
        ['pass-through, past the cap', 200],
        ['a 5xx past the cap', 503],
      ])('%s: the response is cut off, the key released: a retry runs again', async (_name, status) => {
        const { handler, runs } = closingThenSecond(status);
        const options = {
          maxResponseBytes: 4096,
          onResponseTooLarge: 'pass-through' as const,
          conflictWaitMs: 10_000,
        };
        await using(startFastify(idempotency, handler, options), expectCutOffThenRunAgain);
        expect(runs()).toBe(2);
      });
    });

    describe('fastify, a client that disconnects while its body stream is buffered for storage (within the cap)', () => {
      it('the stream is destroyed and the key completed without a stored response: a retry gets 409 response-not-stored and does not run (was read on forever: the producer kept running, the key held in progress while the process lives)', async () => {
        let runs = 0;
        const notStored: unknown[] = [];
        const buffering = deferred();
        let body: Readable | undefined;
        const handler = (reply: FastifyReply) => {
          runs += 1;
          reply.type('text/plain');
          if (runs > 1) return 'second';
          let pushed = false;
          // One chunk, then it never ends: asked for more, it has nothing yet (a slow producer).
          body = new Readable({
            read() {
              if (pushed) return buffering.resolve();
              pushed = true;
              this.push('partial ');
            },
          });
          return body;
        };
        const options = {
          conflictWaitMs: 10_000,
          onResponseNotStored: (info: unknown) => notStored.push(info),
        };
        await using(startFastify(idempotency, handler, options), async (url) => {
          const key = freshKey();
          // Gone once the plugin read the first chunk and waits for the rest (nothing was sent yet).
          await postThenDisconnect(url, key, buffering.promise);
          // The retry waits for the first request's outcome (conflictWaitMs): completed, nothing to replay.
          const retry = await post(url, '/fail', { key, body: { a: 1 } });
          expect(retry.status).toBe(409);
          expect(retry.json).toMatchObject({ type: 'urn:idempotent-consumer:problem:response-not-stored' });
          expect(body?.destroyed).toBe(true);
          expect(notStored).toEqual([
            { scope: expect.any(String), key: key.slice(1, -1), status: 200, bytes: 0 },
          ]);
        });
        expect(runs).toBe(1);
      });
    });

    describe('fastify, a client that disconnects while an async handler runs that answers by returning nothing', () => {
      /** Answers by `return undefined` after setting the status (Fastify sends that empty answer itself, unless the client went away); its first run waits for the client to go. */
      function returningNothing(firstStatus: number) {
        let runs = 0;
        const started = deferred();
        const handler = async (reply: FastifyReply) => {
          runs += 1;
          if (runs > 1) return 'second';
          const gone = once(reply.raw, 'close');
          started.resolve();
          await gone;
          reply.code(firstStatus).header('location', '/orders/7');
        };
        return { handler, started: started.promise, runs: () => runs };
      }

      it('the answer Fastify no longer sends is recorded as it would have gone out: a retry gets it replayed and does not run (was held in progress while the process lives: Fastify sends nothing for an undefined return once the client is gone, so onSend never ran)', async () => {
        const { handler, started, runs } = returningNothing(204);
        await using(startFastify(idempotency, handler, { conflictWaitMs: 5000 }), async (url) => {
          const key = freshKey();
          await postThenDisconnect(url, key, started);
          // The retry waits for the first request's outcome (conflictWaitMs).
          const retry = await post(url, '/fail', { key, body: { a: 1 } });
          expect(retry.json).toBeUndefined();
          expect(retry.status).toBe(204);
          expect(retry.headers.get('location')).toBe('/orders/7');
          expect(retry.headers.get('idempotent-replayed')).toBe('true');
        });
        expect(runs()).toBe(1);
      });

      it('a 5xx set that way releases the key: a retry runs again', async () => {
        const { handler, started, runs } = returningNothing(503);
        await using(startFastify(idempotency, handler, { conflictWaitMs: 5000 }), async (url) => {
          const key = freshKey();
          await postThenDisconnect(url, key, started);
          await expectRetryRunsAgain(url, key);
        });
        expect(runs()).toBe(2);
      });
    });

    describe('fastify, reply.hijack()', () => {
      it('a handler that answers on the raw response completes the key without a stored response: a retry gets 409 response-not-stored and does not run (was held while the process lives)', async () => {
        let runs = 0;
        const handler = (reply: FastifyReply) => {
          runs += 1;
          reply.hijack();
          reply.raw.writeHead(201, { 'content-type': 'text/plain' });
          reply.raw.end('hijacked');
        };
        const notStored: unknown[] = [];
        const options = {
          conflictWaitMs: 10_000,
          onResponseNotStored: (info: unknown) => notStored.push(info),
        };
        await using(startFastify(idempotency, handler, options), async (url) => {
          const key = freshKey();
          const first = await post(url, '/fail', { key, body: { a: 1 } });
          expect(first.status).toBe(201);
          expect(first.bytes.toString()).toBe('hijacked');
          // The retry waits for the first request's outcome (conflictWaitMs).
          const retry = await post(url, '/fail', { key, body: { a: 1 } });
          expect(retry.status).toBe(409);
          expect(retry.json).toMatchObject({ type: 'urn:idempotent-consumer:problem:response-not-stored' });
          expect(runs).toBe(1);
          // Never silent: reported like a pass-through body (no bytes counted past the capture).
          expect(notStored).toEqual([
            { scope: expect.any(String), key: key.slice(1, -1), status: 201, bytes: 0 },
          ]);
        });
      });

      it('a client that disconnects before the hijacked handler ended its response does not complete the key: it stays in progress until handlerTimeoutMs releases it, and the retry runs as ACQUIRED_STALE (was completed: the handler could still fail, retries got 409 response-not-stored)', async () => {
        const timed = new Idempotency({ store }, { leaseMs: 10_000, maxAttempts: 5, handlerTimeoutMs: 2000 });
        const outcomes: (string | undefined)[] = [];
        const started = deferred();
        const gone = deferred();
        const handler = (reply: FastifyReply) => {
          outcomes.push(reply.request.idempotency?.outcome);
          reply.hijack();
          if (outcomes.length > 1) return void reply.raw.writeHead(201).end('second');
          // Registered after the plugin's own close listener (hijack), so it runs after that one. The
          // handler then ends its response late: Node emits no finish on the destroyed response, so that
          // end records nothing either.
          reply.raw.once('close', () => {
            reply.raw.writeHead(200).end('late');
            gone.resolve();
          });
          started.resolve();
        };
        await using(startFastify(timed, handler, { conflictWaitMs: 10_000 }), async (url) => {
          const key = freshKey();
          await postThenDisconnect(url, key, started.promise);
          await gone.promise;
          // The first handler is still running (it never ends its response): the retry waits for the
          // outcome (conflictWaitMs) until the runner gives up on it after handlerTimeoutMs.
          const retry = await post(url, '/fail', { key, body: { a: 1 } });
          expect(retry.status).toBe(201);
          expect(retry.bytes.toString()).toBe('second');
          expect(outcomes).toEqual(['ACQUIRED', 'ACQUIRED_STALE']);
        });
      });

      it('a hijacked 5xx answer releases the key: a retry runs again', async () => {
        let runs = 0;
        const handler = (reply: FastifyReply) => {
          runs += 1;
          reply.hijack();
          reply.raw.writeHead(runs === 1 ? 503 : 201, { 'content-type': 'text/plain' });
          reply.raw.end(`run ${runs}`);
        };
        await using(startFastify(idempotency, handler, { conflictWaitMs: 10_000 }), async (url) => {
          const key = freshKey();
          expect((await post(url, '/fail', { key, body: { a: 1 } })).status).toBe(503);
          const retry = await post(url, '/fail', { key, body: { a: 1 } });
          expect(retry.status).toBe(201);
          expect(retry.bytes.toString()).toBe('run 2');
          expect(runs).toBe(2);
        });
      });
    });
  },
);

/**
 * The first request's response is cut off (its status and part of its body went out, then the handler
 * failed); the retry waits for that request's outcome (`conflictWaitMs`) and, the key released, runs the
 * handler again, which answers 200 `second`.
 */
async function expectCutOffThenRunAgain(url: string): Promise<void> {
  const key = freshKey();
  await expect(post(url, '/fail', { key, body: { a: 1 } })).rejects.toThrow();
  await expectRetryRunsAgain(url, key);
}

/**
 * `POST /fail` with `key` and the body `{ a: 1 }`, from a client that disconnects once `ready` resolves
 * (before any answer): resolves once the request failed on the client's side.
 */
async function postThenDisconnect(url: string, key: string, ready: Promise<void>): Promise<void> {
  const disconnect = new AbortController();
  const sent = fetch(`${url}/fail`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'idempotency-key': key },
    body: JSON.stringify({ a: 1 }),
    signal: disconnect.signal,
  });
  await ready;
  disconnect.abort();
  await expect(sent).rejects.toThrow();
}

/**
 * Two requests with one key to a handler whose first answer is 201 `{ a: 1 }`: the first gets that
 * answer, the retry gets it replayed (`Idempotent-Replayed: true`).
 */
async function expectFirstAnswerReplayed(url: string): Promise<void> {
  const key = freshKey();
  for (const replayed of [null, 'true']) {
    const reply = await post(url, '/fail', { key, body: { a: 1 } });
    expect([reply.status, reply.json, reply.headers.get('idempotent-replayed')]).toEqual([
      201,
      { a: 1 },
      replayed,
    ]);
  }
}

/**
 * A retry with `key` waits for the first request's outcome (`conflictWaitMs`) and, the key released, runs
 * the handler again, which answers 200 `second`.
 */
async function expectRetryRunsAgain(url: string, key: string): Promise<void> {
  const retry = await post(url, '/fail', { key, body: { a: 1 } });
  expect(retry.status).toBe(200);
  expect(retry.bytes.toString()).toBe('second');
}

/** A promise with its `resolve`, to await an event in a handler. */
function deferred(): { promise: Promise<void>; resolve(): void } {
  let resolve!: () => void;
  const promise = new Promise<void>((res) => {
    resolve = res;
  });
  return { promise, resolve };
}
