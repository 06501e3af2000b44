import { randomUUID } from 'node:crypto';
import { Idempotency, RedisIdempotencyStore } from '@idempotent-consumer/core';
import Redis from 'ioredis';
import { describeWithServices } from '../../support/service';
import { freshKey, post, type Reply } from './client';
import { FRAMEWORKS, incompressibleBytes, type StartServer } from './servers';

// `POST /big` streams `size` bytes in 1 KiB writes (Express `res.write`, Fastify a Readable payload);
// `POST /binary` sends `size` incompressible bytes in one piece.
describeWithServices(
  ['redis'],
  'HTTP responses too large to store (maxResponseBytes, the runner maxResultBytes)',
  ({ redis: redisUrl }) => {
    let redis: Redis;
    let idempotency: Idempotency;
    beforeAll(() => {
      redis = new Redis(redisUrl);
      const store = new RedisIdempotencyStore({ redis }, { keyPrefix: `http-large-${randomUUID()}` });
      idempotency = new Idempotency({ store }, { leaseMs: 10_000 });
    });
    afterAll(() => redis.quit());

    /**
     * Starts a server with `start` and `options`, posts `body` to `POST /big` twice with one fresh key, then
     * closes the server; resolves with both replies and how many times the `/big` handler ran.
     */
    async function postBigTwice(
      start: StartServer,
      options: Parameters<StartServer>[1],
      body: { size: number; status?: number },
    ): Promise<{ first: Reply; retry: Reply; runs: number | undefined }> {
      const server = await start(idempotency, options);
      try {
        const key = freshKey();
        const first = await post(server.url, '/big', { key, body });
        const retry = await post(server.url, '/big', { key, body });
        return { first, retry, runs: server.calls.get('big') };
      } finally {
        await server.close();
      }
    }

    describe.each(FRAMEWORKS)('%s', (_name, start) => {
      it('a streamed body within the cap is stored and replayed byte for byte', async () => {
        const { first, retry, runs } = await postBigTwice(start, { maxResponseBytes: 4096 }, { size: 3000 });
        expect(first.status).toBe(200);
        expect(first.bytes.length).toBe(3000);
        expect(retry.headers.get('idempotent-replayed')).toBe('true');
        expect(retry.bytes.equals(first.bytes)).toBe(true);
        expect(runs).toBe(1);
      });

      it("onResponseTooLarge 'fail': 500 response-too-large, the key is FAILED, a retry gets 409 and does not run", async () => {
        const { first, retry, runs } = await postBigTwice(
          start,
          { maxResponseBytes: 4096, onResponseTooLarge: 'fail' },
          { size: 10_000 },
        );
        expect(first.status).toBe(500);
        expect(first.json).toMatchObject({ type: 'urn:idempotent-consumer:problem:response-too-large' });
        expect(retry.status).toBe(409);
        expect(retry.json).toMatchObject({ type: 'urn:idempotent-consumer:problem:idempotency-key-failed' });
        expect(runs).toBe(1);
      });

      it("onResponseTooLarge 'pass-through': the whole body is sent, not stored, reported; a retry gets 409 response-not-stored", async () => {
        const notStored: number[] = [];
        const { first, retry, runs } = await postBigTwice(
          start,
          {
            maxResponseBytes: 4096,
            onResponseTooLarge: 'pass-through',
            onResponseNotStored: (info) => notStored.push(info.bytes),
          },
          { size: 10_000 },
        );
        expect(first.status).toBe(200);
        expect(first.bytes.equals(Buffer.alloc(10_000, 'x'))).toBe(true);
        expect(retry.status).toBe(409);
        expect(retry.json).toMatchObject({ type: 'urn:idempotent-consumer:problem:response-not-stored' });
        expect(runs).toBe(1);
        expect(notStored).toHaveLength(1);
        expect(notStored[0]).toBeGreaterThan(4096);
      });

      it('a streamed 5xx body above the cap is sent whole and released, whatever onResponseTooLarge says', async () => {
        const { first, retry, runs } = await postBigTwice(
          start,
          { maxResponseBytes: 4096, onResponseTooLarge: 'fail' },
          { size: 10_000, status: 503 },
        );
        expect(first.status).toBe(503);
        expect(first.bytes.length).toBe(10_000);
        expect(retry.status).toBe(503);
        expect(runs).toBe(2);
      });
    });

    // The defaults: maxResponseBytes and the runner's maxResultBytes are both 65536, and the runner's
    // onResultTooLarge is 'omit'. 60 KiB of bytes that are not UTF-8 and do not deflate pass the first
    // (61440 body bytes) but not the second (stored as base64 in JSON, about 82 KB encoded).
    describe.each(FRAMEWORKS)('%s, default options', (_name, start) => {
      it('a binary body within maxResponseBytes whose stored form passes maxResultBytes is sent, reported to onResponseNotStored, and a retry gets 409 response-not-stored', async () => {
        const size = 60 * 1024;
        const notStored: { scope: string; key: string; status: number; bytes: number }[] = [];
        const omitted: number[] = [];
        const onOmitted = (e: { bytes: number }) => omitted.push(e.bytes);
        idempotency.on('resultOmitted', onOmitted);
        const server = await start(idempotency, { onResponseNotStored: (info) => notStored.push(info) });
        try {
          const uuid = randomUUID();
          const first = await post(server.url, '/binary', { key: `"${uuid}"`, body: { size } });
          expect(first.status).toBe(200);
          expect(first.headers.get('content-type')).toMatch(/^application\/octet-stream/);
          expect(first.bytes.equals(incompressibleBytes(size))).toBe(true);
          // The runner left the response out of the record (this is the case under test, not another limit).
          expect(omitted).toHaveLength(1);
          expect(omitted[0]).toBeGreaterThan(65_536);
          // Before the fix: not called (the key completed without its response, silently).
          expect(notStored).toEqual([{ scope: '["POST","/binary"]', key: uuid, status: 200, bytes: size }]);

          const retry = await post(server.url, '/binary', { key: `"${uuid}"`, body: { size } });
          expect(retry.status).toBe(409);
          expect(retry.json).toMatchObject({ type: 'urn:idempotent-consumer:problem:response-not-stored' });
          expect(retry.headers.get('idempotent-replayed')).toBeNull();
          expect(server.calls.get('binary')).toBe(1);
          expect(notStored).toHaveLength(1);
        } finally {
          idempotency.off('resultOmitted', onOmitted);
          await server.close();
        }
      });
    });
  },
);
