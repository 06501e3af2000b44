import type { Socket } from 'node:net';
import { Idempotency, RedisIdempotencyStore } from '@idempotent-consumer/core';
import { Redis } from 'ioredis';
import { describeWithServices } from '../../support/service';
import { deleteByPrefix, uniquePrefix } from './redis-target';

/** Counts the writes a client's socket receives from Node's stream layer (`_write`, `_writev`). */
function countSocketWrites(redis: Redis): { readonly count: number } {
  const socket = (redis as unknown as { stream: Socket }).stream;
  const counter = { count: 0 };
  const write = socket._write.bind(socket);
  const writev = socket._writev!.bind(socket);
  socket._write = (chunk, encoding, callback) => {
    counter.count++;
    write(chunk, encoding, callback);
  };
  socket._writev = (chunks, callback) => {
    counter.count++;
    writev(chunks, callback);
  };
  return counter;
}

// maxCommandsPerWrite on a real socket: calls share writes, and every reply still reaches its own call.
describeWithServices(['redis'], 'RedisIdempotencyStore write coalescing', ({ redis: url }) => {
  const prefix = uniquePrefix('write-coalescing');
  const clients: Redis[] = [];
  const stores: RedisIdempotencyStore[] = [];

  /** A store on `redis`, closed after the suite (a duplicate waiting for an outcome opens a subscriber). */
  function storeOn(redis: Redis, options: ConstructorParameters<typeof RedisIdempotencyStore>[1]) {
    const store = new RedisIdempotencyStore({ redis }, options);
    stores.push(store);
    return store;
  }

  async function connected(): Promise<Redis> {
    const redis = new Redis(url);
    clients.push(redis);
    await redis.ping();
    return redis;
  }

  afterAll(async () => {
    for (const store of stores) store.close();
    if (clients[0]) await deleteByPrefix(clients[0], prefix);
    await Promise.all(clients.map((c) => c.quit()));
  });

  it('64 claims sent in one tick leave in at most 9 writes (default), and each gets its own reply', async () => {
    const redis = await connected();
    const store = storeOn(redis, { keyPrefix: `${prefix}:8` });
    const writes = countSocketWrites(redis);
    const options = { leaseMs: 30_000, retentionMs: 60_000 };
    const ids = Array.from({ length: 64 }, (_, i) => ({ scope: 'w', key: `k${i}` }));
    const claims = await Promise.all(ids.map((id) => store.claim(id, options)));
    // The first leaves at once (nothing was in flight), the other 63 eight at a time.
    expect(writes.count).toBeLessThanOrEqual(9);
    expect(claims.map((c) => c.outcome)).toEqual(ids.map(() => 'ACQUIRED'));
    // Completed with each key's own result: a reply delivered to the wrong call would show here.
    await Promise.all(
      ids.map((id, i) =>
        store.complete(id, claims[i]!.fencingToken, { retentionMs: 60_000, result: `j"${id.key}"` }),
      ),
    );
    const again = await Promise.all(ids.map((id) => store.claim(id, options)));
    expect(again.map((r) => (r.outcome === 'DUPLICATE' ? r.result : r.outcome))).toEqual(
      ids.map((id) => `j"${id.key}"`),
    );
  });

  it('maxCommandsPerWrite: 1 writes each call at once', async () => {
    const redis = await connected();
    const store = storeOn(redis, { keyPrefix: `${prefix}:1`, maxCommandsPerWrite: 1 });
    const writes = countSocketWrites(redis);
    const ids = Array.from({ length: 64 }, (_, i) => ({ scope: 'w', key: `k${i}` }));
    await Promise.all(ids.map((id) => store.claim(id, { leaseMs: 30_000, retentionMs: 60_000 })));
    expect(writes.count).toBeGreaterThan(8);
  });

  it('runs at 50 in flight through a coalescing store run each handler once and replay to duplicates', async () => {
    const redis = await connected();
    const store = storeOn(redis, { keyPrefix: `${prefix}:run` });
    const idempotency = new Idempotency({ store }, { leaseMs: 30_000 });
    const runs = new Map<string, number>();
    const keys = Array.from({ length: 500 }, (_, i) => `m${i}`);
    const work = async (key: string) =>
      idempotency.run({ scope: 'w', key }, async () => {
        runs.set(key, (runs.get(key) ?? 0) + 1);
        return key.toUpperCase();
      });
    // Every key twice, 50 at a time: the second is a duplicate (or a CONFLICT while the first runs).
    const queue = [...keys, ...keys];
    const results: { key: string; outcome: string; result?: unknown }[] = [];
    await Promise.all(
      Array.from({ length: 50 }, async () => {
        for (let key = queue.shift(); key !== undefined; key = queue.shift()) {
          const r = await work(key);
          results.push({ key, outcome: r.outcome, result: 'result' in r ? r.result : undefined });
        }
      }),
    );
    expect([...runs.values()].every((n) => n === 1)).toBe(true);
    expect(runs.size).toBe(keys.length);
    for (const r of results) {
      if (r.outcome === 'ACQUIRED' || r.outcome === 'DUPLICATE') expect(r.result).toBe(r.key.toUpperCase());
      else expect(r.outcome).toBe('CONFLICT');
    }
  });
});
