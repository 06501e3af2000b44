import { randomUUID } from 'node:crypto';
import { Idempotency, RedisIdempotencyStore } from '@idempotent-consumer/core';
import Redis from 'ioredis';
import { describeWithServices } from '../../support/service';
import { freshKey, post } from './client';
import { FRAMEWORKS } from './servers';

// `POST /big` streams `size` bytes in 1 KiB writes (Express `res.write`, Fastify a Readable payload).
describeWithServices(['redis'], 'HTTP responses above maxResponseBytes', ({ redis: redisUrl }) => {
  let redis: Redis;
  let idempotency: Idempotency;
  beforeAll(() => {
    redis = new Redis(redisUrl);
    const store = new RedisIdempotencyStore({ redis }, { keyPrefix: `http-large-${randomUUID()}` });
    idempotency = new Idempotency({ store }, { leaseMs: 10_000 });
  });
  afterAll(() => redis.quit());

  describe.each(FRAMEWORKS)('%s', (_name, start) => {
    it('a streamed body within the cap is stored and replayed byte for byte', async () => {
      const server = await start(idempotency, { maxResponseBytes: 4096 });
      try {
        const key = freshKey();
        const first = await post(server.url, '/big', { key, body: { size: 3000 } });
        expect(first.status).toBe(200);
        expect(first.bytes.length).toBe(3000);
        const again = await post(server.url, '/big', { key, body: { size: 3000 } });
        expect(again.headers.get('idempotent-replayed')).toBe('true');
        expect(again.bytes.equals(first.bytes)).toBe(true);
        expect(server.calls.get('big')).toBe(1);
      } finally {
        await server.close();
      }
    });

    it("onResponseTooLarge 'fail': 500 response-too-large, the key is FAILED, a retry gets 409 and does not run", async () => {
      const server = await start(idempotency, { maxResponseBytes: 4096, onResponseTooLarge: 'fail' });
      try {
        const key = freshKey();
        const r = await post(server.url, '/big', { key, body: { size: 10_000 } });
        expect(r.status).toBe(500);
        expect(r.json).toMatchObject({ type: 'urn:idempotent-consumer:problem:response-too-large' });
        const retry = await post(server.url, '/big', { key, body: { size: 10_000 } });
        expect(retry.status).toBe(409);
        expect(retry.json).toMatchObject({ type: 'urn:idempotent-consumer:problem:idempotency-key-failed' });
        expect(server.calls.get('big')).toBe(1);
      } finally {
        await server.close();
      }
    });

    it("onResponseTooLarge 'pass-through': the whole body is sent, not stored, reported; a retry gets 409 response-not-stored", async () => {
      const notStored: number[] = [];
      const server = await start(idempotency, {
        maxResponseBytes: 4096,
        onResponseTooLarge: 'pass-through',
        onResponseNotStored: (info) => notStored.push(info.bytes),
      });
      try {
        const key = freshKey();
        const r = await post(server.url, '/big', { key, body: { size: 10_000 } });
        expect(r.status).toBe(200);
        expect(r.bytes.equals(Buffer.alloc(10_000, 'x'))).toBe(true);
        const retry = await post(server.url, '/big', { key, body: { size: 10_000 } });
        expect(retry.status).toBe(409);
        expect(retry.json).toMatchObject({ type: 'urn:idempotent-consumer:problem:response-not-stored' });
        expect(server.calls.get('big')).toBe(1);
        expect(notStored).toHaveLength(1);
        expect(notStored[0]).toBeGreaterThan(4096);
      } finally {
        await server.close();
      }
    });

    it('a streamed 5xx body above the cap is sent whole and released, whatever onResponseTooLarge says', async () => {
      const server = await start(idempotency, { maxResponseBytes: 4096, onResponseTooLarge: 'fail' });
      try {
        const key = freshKey();
        const r = await post(server.url, '/big', { key, body: { size: 10_000, status: 503 } });
        expect(r.status).toBe(503);
        expect(r.bytes.length).toBe(10_000);
        const retry = await post(server.url, '/big', { key, body: { size: 10_000, status: 503 } });
        expect(retry.status).toBe(503);
        expect(server.calls.get('big')).toBe(2);
      } finally {
        await server.close();
      }
    });
  });
});
