import { RedisIdempotencyStore, StoreUnavailableError } from '@idempotent-consumer/core';
import Redis from 'ioredis';
import {
  claimScript,
  completeScript,
  failScript,
  giveBackScript,
  releaseScript,
} from '../../../packages/core/src/generated/scripts';
import { waitFor } from '../../support/net';
import { RedisProxy } from '../../support/redis-proxy';
import { RedisServer } from '../../support/redis-server';
import { describeWithServices } from '../../support/service';
import { deleteByPrefix } from './redis-target';

// A claim whose caller gave up on it (commandTimeoutMs, a lost connection) must not hold its key once Redis
// answers again: before, Redis applied it late (ioredis's offline queue, a command resent after a reconnect,
// packets a network held) and the record read IN_PROGRESS, attempt 1, a full lease nobody ran; the next claim
// met CONFLICT for that lease, then ran ACQUIRED_STALE with an attempt spent.

const LEASE_MS = 60_000;
const RETENTION_MS = 600_000;
const options = { leaseMs: LEASE_MS, retentionMs: RETENTION_MS, maxAttempts: 3 };

describeWithServices(['redis'], 'claims whose reply never came are given back once Redis answers', () => {
  let server: RedisServer;
  let proxy: RedisProxy;
  let admin: Redis;
  const clients: Redis[] = [];
  beforeAll(async () => {
    server = await RedisServer.start();
    proxy = await RedisProxy.start(server.port);
    admin = new Redis(server.url);
  });
  afterEach(async () => {
    proxy.forward();
    for (const client of clients.splice(0)) client.disconnect();
  });
  afterAll(async () => {
    admin?.disconnect();
    await proxy?.close();
    await server?.dispose();
  });

  /** A client through the proxy with ioredis's default options (as the READMEs make one), once ready. */
  const connect = async () => {
    const client = new Redis(proxy.url);
    clients.push(client);
    client.on('error', () => {});
    await waitFor('the client to be ready', () => client.status === 'ready');
    return client;
  };
  const storeOn = (redis: Redis, commandTimeoutMs = 300) =>
    new RedisIdempotencyStore({ redis }, { keyPrefix: 'unanswered', commandTimeoutMs });
  /** The record as Redis holds it, read past the proxy. */
  const reader = () => storeOn(admin, 5_000);
  let n = 0;
  const freshId = () => ({ scope: 's', key: `k-${process.pid}-${++n}` });

  it('packets dropped: a claim that timed out, applied once the network heals, is given back unrun', async () => {
    const store = storeOn(await connect());
    const id = freshId();
    proxy.drop();
    await expect(store.claim(id, options)).rejects.toBeInstanceOf(StoreUnavailableError);
    expect(await reader().get(id)).toBeNull(); // held by the network, not applied yet
    proxy.forward(); // the claim reaches Redis now, long after its caller gave up
    await waitFor('the give-back', () => store.pendingReleases === 0);
    expect(await reader().get(id)).toMatchObject({ state: 'RELEASED', attempt: 0, abandoned: false });
    expect(await store.claim(id, options)).toMatchObject({ outcome: 'ACQUIRED', attempt: 1 });
  });

  it('Redis refuses connections, default ioredis options: a claim is refused at once and nothing is queued', async () => {
    const client = await connect();
    const store = storeOn(client, 5_000);
    const id = freshId();
    proxy.refuse();
    await waitFor('the client to lose its connection', () => client.status !== 'ready');
    const error = await store.claim(id, options).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(StoreUnavailableError);
    // Not a timeout: refused before it was sent (with ioredis's offline queue it waited for the reconnect).
    expect((error as Error).message).toMatch(/^Redis is not connected, nothing was sent/);
    proxy.forward();
    await waitFor('the client to reconnect', () => client.status === 'ready', 10_000);
    expect(await reader().get(id)).toBeNull();
    expect(await store.claim(id, options)).toMatchObject({ outcome: 'ACQUIRED', attempt: 1 });
  });

  it('a connection reset with the claim on it: the claim ioredis resends after the reconnect is given back', async () => {
    const client = await connect();
    const store = storeOn(client);
    const id = freshId();
    proxy.drop(); // the claim is written and held...
    const claimed = store.claim(id, options).catch((e: unknown) => e);
    await waitFor('the claim on its way', () => proxy.heldBytes > 0);
    proxy.refuse(); // ...then the connection is reset: ioredis keeps the claim and resends it on reconnect
    expect(await claimed).toBeInstanceOf(StoreUnavailableError);
    proxy.forward();
    await waitFor('the client to reconnect', () => client.status === 'ready', 10_000);
    await waitFor('the give-back', () => store.pendingReleases === 0);
    const record = await reader().get(id);
    expect(record === null || (record.state === 'RELEASED' && record.attempt === 0)).toBe(true);
    expect(await store.claim(id, options)).toMatchObject({ outcome: 'ACQUIRED', attempt: 1 });
  });

  it('20 outages in a row on one key that never runs: it is still claimable as attempt 1', async () => {
    const client = await connect();
    const store = storeOn(client);
    const id = freshId();
    // A short lease: each late claim left behind lapsed before the next outage, and the next one took the
    // key as ACQUIRED_STALE with another attempt spent, until maxAttempts turned the record FAILED.
    const short = { ...options, leaseMs: 200 };
    for (let outage = 0; outage < 20; outage++) {
      if (outage % 2 === 0) {
        proxy.drop();
        await expect(store.claim(id, short)).rejects.toBeInstanceOf(StoreUnavailableError);
      } else {
        proxy.drop();
        const claimed = store.claim(id, short).catch((e: unknown) => e);
        await waitFor('the claim on its way', () => proxy.heldBytes > 0);
        proxy.refuse();
        expect(await claimed).toBeInstanceOf(StoreUnavailableError);
      }
      proxy.heldBytes = 0;
      proxy.forward();
      await waitFor('the client to be ready', () => client.status === 'ready', 10_000);
      await waitFor('the give-back', () => store.pendingReleases === 0);
      await new Promise((r) => setTimeout(r, 250)); // past the lease a claim left behind would hold
    }
    expect(await store.claim(id, short)).toMatchObject({ outcome: 'ACQUIRED', attempt: 1 });
  }, 120_000);

  it('a late claim that took over a stale record leaves it stale, with the attempts it had', async () => {
    const store = storeOn(await connect());
    const id = freshId();
    const first = await store.claim(id, { ...options, leaseMs: 1 });
    expect(first).toMatchObject({ outcome: 'ACQUIRED', attempt: 1 });
    await new Promise((r) => setTimeout(r, 20)); // its lease lapses: the handler may have left partial effects
    proxy.drop();
    await expect(store.claim(id, options)).rejects.toBeInstanceOf(StoreUnavailableError);
    proxy.forward();
    await waitFor('the give-back', () => store.pendingReleases === 0);
    expect(await reader().get(id)).toMatchObject({ state: 'RELEASED', attempt: 1, abandoned: true });
    expect(await store.claim(id, options)).toMatchObject({ outcome: 'ACQUIRED_STALE', attempt: 2 });
  });

  it('claimMany whose pipeline went unanswered: every claim of it is given back', async () => {
    const store = storeOn(await connect());
    const ids = [freshId(), freshId(), freshId()];
    proxy.drop();
    await expect(
      store.claimMany(ids.map((id) => ({ id, options: { ...options, reserve: false } }))),
    ).rejects.toBeInstanceOf(StoreUnavailableError);
    proxy.forward();
    await waitFor('the give-backs', () => store.pendingReleases === 0);
    for (const id of ids) expect(await reader().get(id)).toMatchObject({ state: 'RELEASED', attempt: 0 });
  });

  it('a first connection is not an outage: a claim sent while the client connects goes out once it is up', async () => {
    const client = new Redis(proxy.url, { lazyConnect: true });
    clients.push(client);
    const store = storeOn(client, 5_000);
    expect(client.status).toBe('wait');
    await expect(store.claim(freshId(), options)).resolves.toMatchObject({ outcome: 'ACQUIRED' });
    const connecting = new Redis(proxy.url);
    clients.push(connecting);
    expect(connecting.status).toBe('connecting');
    await expect(storeOn(connecting, 5_000).claim(freshId(), options)).resolves.toMatchObject({
      outcome: 'ACQUIRED',
    });
  });

  it('a first connection slower than commandTimeoutMs: the claim it then writes is given back', async () => {
    proxy.drop();
    const client = new Redis(proxy.url);
    clients.push(client);
    client.on('error', () => {});
    const store = storeOn(client);
    const id = freshId();
    await expect(store.claim(id, options)).rejects.toBeInstanceOf(StoreUnavailableError);
    proxy.forward(); // the ready check is answered: ioredis writes the claim from its offline queue
    await waitFor('the client to be ready', () => client.status === 'ready');
    await waitFor('the give-back', () => store.pendingReleases === 0);
    expect(await reader().get(id)).toMatchObject({ state: 'RELEASED', attempt: 0 });
  });

  it('a slow server (CLIENT PAUSE WRITE longer than commandTimeoutMs): the claim it applies after is given back', async () => {
    const store = storeOn(await connect());
    const id = freshId();
    await admin.client('PAUSE', 800, 'WRITE');
    await expect(store.claim(id, options)).rejects.toBeInstanceOf(StoreUnavailableError);
    await waitFor('the give-back', () => store.pendingReleases === 0);
    expect(await reader().get(id)).toMatchObject({ state: 'RELEASED', attempt: 0 });
  });
});

// lua/give-back.lua row by row, on the scripts as the store embeds them: what a claim's nonce (n) names,
// and what a give-back by nonce may and may not change.
describeWithServices(['redis'], 'give-back.lua: a claim named by its nonce', ({ redis: url }) => {
  let redis: Redis;
  const prefix = `give-back-lua:${process.pid}:${Date.now()}`;
  beforeAll(() => {
    redis = new Redis(url);
  });
  afterAll(async () => {
    await deleteByPrefix(redis, prefix);
    redis.disconnect();
  });
  let n = 0;
  const freshKey = () => `${prefix}:${++n}`;
  const claim = (key: string, nonce: string, { leaseMs = 60_000, reserve = '0', maxAttempts = 0 } = {}) =>
    redis.eval(
      claimScript.lua,
      1,
      key,
      leaseMs,
      RETENTION_MS,
      '',
      maxAttempts,
      reserve,
      '',
      nonce,
    ) as Promise<[string, number, number]>;
  const giveBack = (key: string, nonce: string) =>
    redis.eval(giveBackScript.lua, 1, key, nonce, RETENTION_MS) as Promise<unknown[]>;
  const lapse = async (key: string) => {
    await redis.hset(key, 'e', '1');
  };

  it('gives back the claim sent with the nonce: RELEASED, its attempt returned, n removed; then nothing more', async () => {
    const key = freshKey();
    const [, token] = await claim(key, 'n1');
    expect(await redis.hget(key, 'n')).toBe(`n1:${token}`);
    expect(await giveBack(key, 'n1')).toEqual(['OK', expect.any(Number)]);
    const fields = await redis.hgetall(key);
    expect(fields).toMatchObject({ s: 'R', t: String(token), a: '0' });
    expect(fields).not.toHaveProperty('n');
    expect(fields).not.toHaveProperty('e');
    expect(fields).not.toHaveProperty('b');
    expect(await redis.pttl(key)).toBeGreaterThan(RETENTION_MS - 5_000);
    expect(await giveBack(key, 'n1')).toEqual(['LEASE_LOST', token, 'R']);
    expect(await claim(key, 'n2')).toEqual([
      'ACQUIRED',
      expect.any(Number),
      1,
      expect.any(Number),
      expect.any(Number),
      1,
    ]);
  });

  it('another nonce, a record no claim holds, a finished one: nothing changes (LEASE_LOST)', async () => {
    const key = freshKey();
    expect(await giveBack(key, 'nobody')).toEqual(['LEASE_LOST', 0, '']);
    const [, token] = await claim(key, 'mine');
    expect(await giveBack(key, 'other')).toEqual(['LEASE_LOST', token, 'P']);
    await redis.eval(completeScript.lua, 1, key, token, RETENTION_MS, '0', '');
    expect(await redis.hgetall(key)).not.toHaveProperty('n'); // a COMPLETED record does not keep it
    expect(await giveBack(key, 'mine')).toEqual(['LEASE_LOST', token, 'C']);
    expect(await redis.hget(key, 's')).toBe('C');
  });

  it('an n left by a claim that a worker without nonces took over names a token that is gone: its holder keeps the key', async () => {
    const key = freshKey();
    await claim(key, 'old');
    await lapse(key);
    const [outcome, token] = await claim(key, ''); // a worker of an earlier version sends no nonce
    expect(outcome).toBe('ACQUIRED_STALE');
    expect(await giveBack(key, 'old')).toEqual(['LEASE_LOST', token, 'P']);
    expect(await redis.hmget(key, 's', 't')).toEqual(['P', String(token)]);
  });

  it('a reservation counted no attempt; a claim that took over a stale record leaves it stale (b), its attempts as before', async () => {
    const reserved = freshKey();
    await claim(reserved, 'r', { reserve: '1' });
    expect(await giveBack(reserved, 'r')).toEqual(['OK', expect.any(Number)]);
    expect(await redis.hmget(reserved, 's', 'a', 'v', 'b')).toEqual(['R', '0', null, null]);

    const stale = freshKey();
    await claim(stale, 'first');
    await lapse(stale); // its handler may have left partial effects
    const [outcome, token, attempt] = await claim(stale, 'late');
    expect([outcome, attempt]).toEqual(['ACQUIRED_STALE', 2]);
    expect(await redis.hget(stale, 'n')).toBe(`*late:${token}`);
    expect(await giveBack(stale, 'late')).toEqual(['OK', expect.any(Number)]);
    expect(await redis.hmget(stale, 's', 'a', 'b')).toEqual(['R', '1', '1']);
    expect((await claim(stale, 'next'))[0]).toBe('ACQUIRED_STALE');
  });

  it('release, fail and a claim past maxAttempts drop n; a bad nonce is a Lua error', async () => {
    for (const settle of [
      (key: string, token: number) => redis.eval(releaseScript.lua, 1, key, token, RETENTION_MS, '0', '0'),
      (key: string, token: number) => redis.eval(failScript.lua, 1, key, token, RETENTION_MS, 'E', '0'),
    ]) {
      const key = freshKey();
      const [, token] = await claim(key, 'x');
      await settle(key, token);
      expect(await redis.hgetall(key)).not.toHaveProperty('n');
    }
    const exhausted = freshKey();
    await claim(exhausted, 'a', { maxAttempts: 1 });
    await lapse(exhausted);
    expect((await claim(exhausted, 'b', { maxAttempts: 1 }))[0]).toBe('FAILED');
    expect(await redis.hgetall(exhausted)).not.toHaveProperty('n');
    await expect(claim(freshKey(), 'not:a:nonce')).rejects.toThrow(/bad arguments/);
    await expect(claim(freshKey(), 'x'.repeat(65))).rejects.toThrow(/bad arguments/);
    await expect(giveBack(freshKey(), '')).rejects.toThrow(/bad arguments/);
  });
});
