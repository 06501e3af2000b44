import { type AcquiredReply, RedisIdempotencyStore } from '@idempotent-consumer/core';
import Redis from 'ioredis';
import { OutcomeNotifications } from '../../../packages/core/src/store/outcome-notifications';
import {
  type ContractTarget,
  describeStoreContract,
  LONG_LEASE_MS,
  RETENTION_MS,
} from '../../../packages/core/test/contract/store-contract';
import { RedisServer } from '../../support/redis-server';
import { describeWithServices } from '../../support/service';
import { deleteByPrefix, redisClock, redisContractTarget, serverTimeMs, useRedisStore } from './redis-target';

// The store contract (one row per transition of the state table of docs/design.md#the-record-and-its-states) on real Redis: the same table
// the unit project runs on MemoryIdempotencyStore, with short leases expired on the server clock.
describeWithServices(['redis'], 'store contract: RedisIdempotencyStore on Redis', ({ redis: url }) => {
  for (const enableAutoPipelining of [false, true]) {
    describe(`enableAutoPipelining: ${enableAutoPipelining}`, () => {
      const suite = useRedisStore(url, `contract-${enableAutoPipelining}`, { enableAutoPipelining });
      let target: ContractTarget;
      beforeAll(() => {
        target = redisContractTarget(suite.redis, suite.prefix);
      });

      describeStoreContract(
        'RedisIdempotencyStore',
        () => target,
        () => ({ shortLeaseMs: 100, shortRetentionMs: 100, ttlSlackMs: 2000, scope: 'contract' }),
      );
    });
  }

  describe('Redis specifics', () => {
    const suite = useRedisStore(url, 'specifics');
    const { prefix } = suite;
    const options = { leaseMs: LONG_LEASE_MS, retentionMs: RETENTION_MS };
    let redis: Redis;
    let store: RedisIdempotencyStore;
    beforeAll(() => {
      ({ redis, store } = suite);
    });

    it('keeps the record in one hash with the documented short fields, TTL from the server', async () => {
      const id = { scope: 'spec', key: 'fields' };
      const claim = await store.claim(id, { ...options, fingerprint: 'f'.repeat(64) });
      const key = store.recordKey(id);
      expect(await redis.type(key)).toBe('hash');
      const fields = await redis.hgetall(key);
      expect(fields).toEqual({
        s: 'P',
        t: String(claim.fencingToken),
        a: '1',
        e: String((claim as { leaseExpiresAtMs: number }).leaseExpiresAtMs),
        u: expect.stringMatching(/^\d{13}$/),
        c: expect.stringMatching(/^\d{13}$/),
        p: Buffer.from('f'.repeat(64), 'hex').toString('base64').replace(/=+$/, ''), // the fingerprint
        // The claim's nonce and its token: what a give-back of it, had its reply been lost, must match.
        n: expect.stringMatching(new RegExp(`^[\\w-]+:${claim.fencingToken}$`)),
      });
      const now = await serverTimeMs(redis);
      expect(Math.abs(Number(fields.u) - now)).toBeLessThan(1000);
      // The token is the server clock in microseconds, written with every digit (never '1.7e+15').
      expect(fields.t).toMatch(/^\d{16}$/);
      expect(Math.abs(claim.fencingToken / 1000 - now)).toBeLessThan(1000);
      expect(Number.isSafeInteger(claim.fencingToken)).toBe(true);
      expect(await redis.pttl(key)).toBeGreaterThan(LONG_LEASE_MS + RETENTION_MS - 2000);
    });

    it('a completed record keeps only s t w (a when above 1), p when a fingerprint was given, and r when it has a result', async () => {
      const withAll = { scope: 'spec', key: 'lean-fp' };
      const bare = { scope: 'spec', key: 'lean-bare' };
      const a = await store.claim(withAll, { ...options, fingerprint: 'f'.repeat(64) });
      const b = await store.claim(bare, options);
      expect(await redis.hgetall(store.recordKey(bare))).not.toHaveProperty('f'); // no empty fingerprint
      await store.complete(withAll, a.fencingToken, { retentionMs: RETENTION_MS, result: 'j"r"' });
      await store.complete(bare, b.fencingToken, { retentionMs: RETENTION_MS });
      // w: the completion time as ms after the token's time, a small integer.
      const stamp = expect.stringMatching(/^-?\d{1,6}$/);
      expect(await redis.hgetall(store.recordKey(withAll))).toEqual({
        s: 'C',
        t: String(a.fencingToken),
        w: stamp,
        p: Buffer.from('f'.repeat(64), 'hex').toString('base64').replace(/=+$/, ''), // the fingerprint
        r: 'j"r"',
      });
      expect(await redis.hgetall(store.recordKey(bare))).toEqual({
        s: 'C',
        t: String(b.fencingToken),
        w: stamp,
      });
      const completedAtMs = (await store.get(bare))!.updatedAtMs;
      expect(Math.abs(completedAtMs - Date.now())).toBeLessThan(60_000);
      expect(completedAtMs - Math.floor(b.fencingToken / 1000)).toBe(
        Number(await redis.hget(store.recordKey(bare), 'w')),
      );
      // Without a, a completed record completed on its first attempt.
      expect(await store.claim(bare, options)).toMatchObject({
        outcome: 'DUPLICATE',
        attempt: 1,
        result: undefined,
      });
      expect(await store.get(bare)).toMatchObject({
        state: 'COMPLETED',
        attempt: 1,
        result: undefined,
        createdAtMs: 0,
      });
      expect(await store.claim(withAll, options)).toMatchObject({
        outcome: 'DUPLICATE',
        attempt: 1,
        result: 'j"r"',
      });
      expect(await store.claim(withAll, { ...options, fingerprint: 'e'.repeat(64) })).toMatchObject({
        outcome: 'PAYLOAD_MISMATCH',
        attempt: 1,
      });
    });

    it('a record completed on a later attempt keeps a', async () => {
      const id = { scope: 'spec', key: 'lean-second' };
      const first = await store.claim(id, options);
      await store.release(id, first.fencingToken, { retentionMs: RETENTION_MS });
      const second = await store.claim(id, options);
      await store.complete(id, second.fencingToken, { retentionMs: RETENTION_MS });
      expect(await redis.hget(store.recordKey(id), 'a')).toBe('2');
      expect(await store.claim(id, options)).toMatchObject({ outcome: 'DUPLICATE', attempt: 2 });
      expect(await store.get(id)).toMatchObject({ state: 'COMPLETED', attempt: 2 });
    });

    it('reads records of the layout before 0.2 (f in hex, u, a = 1): compared in hex, their times and attempt kept', async () => {
      const id = { scope: 'spec', key: 'old-layout-fp' };
      const key = store.recordKey(id);
      await redis.hset(key, {
        s: 'C',
        t: '1700000000000001',
        a: '1',
        u: '1700000000123',
        f: 'c'.repeat(64),
        r: 'j2',
      });
      await redis.pexpire(key, RETENTION_MS);
      expect(await store.claim(id, { ...options, fingerprint: 'c'.repeat(64) })).toEqual({
        outcome: 'DUPLICATE',
        fencingToken: 1700000000000001,
        attempt: 1,
        result: 'j2',
        completedAtMs: 1700000000123,
      });
      expect(await store.claim(id, { ...options, fingerprint: 'd'.repeat(64) })).toMatchObject({
        outcome: 'PAYLOAD_MISMATCH',
      });
      expect(await store.get(id)).toMatchObject({ fingerprint: 'c'.repeat(64), updatedAtMs: 1700000000123 });
      expect(await redis.hgetall(key)).not.toHaveProperty('p'); // nothing rewritten
    });

    it('a fingerprint is stored in base64 (p) and read back in hex', async () => {
      const id = { scope: 'spec', key: 'fp-base64' };
      const fp = '0123456789abcdef'.repeat(4);
      await store.claim(id, { ...options, fingerprint: fp });
      expect(await redis.hget(store.recordKey(id), 'p')).toBe(
        Buffer.from(fp, 'hex').toString('base64').replace(/=+$/, ''),
      );
      expect(await redis.hget(store.recordKey(id), 'f')).toBeNull();
      expect(await store.get(id)).toMatchObject({ fingerprint: fp });
      expect(await store.claim(id, { ...options, fingerprint: fp.replace('0', '1') })).toMatchObject({
        outcome: 'PAYLOAD_MISMATCH',
      });
    });

    it('reads records of the earlier layout (h, an empty r and f, c): no result is no result', async () => {
      const id = { scope: 'spec', key: 'old-layout' };
      const key = store.recordKey(id);
      await redis.hset(key, {
        s: 'C',
        t: '1700000000000001',
        a: '1',
        u: '1700000000000',
        c: '1700000000000',
        f: '',
        h: '0',
        r: '',
      });
      await redis.pexpire(key, RETENTION_MS);
      expect(await store.claim(id, options)).toMatchObject({ outcome: 'DUPLICATE', result: undefined });
      expect(await store.get(id)).toMatchObject({ result: undefined, fingerprint: '' });
      const withResult = { scope: 'spec', key: 'old-layout-result' };
      await redis.hset(store.recordKey(withResult), {
        s: 'C',
        t: '1700000000000001',
        a: '1',
        u: '1700000000000',
        h: '1',
        r: 'j1',
      });
      await redis.pexpire(store.recordKey(withResult), RETENTION_MS);
      expect(await store.claim(withResult, options)).toMatchObject({ outcome: 'DUPLICATE', result: 'j1' });
    });

    it('complete, release and fail publish the outcome on the sharded channel named like the record key', async () => {
      const subscriber = redis.duplicate();
      try {
        const messages: [string, string][] = [];
        subscriber.on('smessage', (channel: string, message: string) => messages.push([channel, message]));
        const ids = ['pub-c', 'pub-r', 'pub-f'].map((key) => ({ scope: 'spec', key }));
        await subscriber.ssubscribe(...ids.map((id) => store.recordKey(id)));
        const tokens = await Promise.all(
          ids.map(async (id) => (await store.claim(id, options)).fencingToken),
        );
        await store.complete(ids[0]!, tokens[0]!, { retentionMs: RETENTION_MS });
        await store.release(ids[1]!, tokens[1]!, { retentionMs: RETENTION_MS });
        await store.fail(ids[2]!, tokens[2]!, { retentionMs: RETENTION_MS, error: 'E' });
        const deadline = Date.now() + 10_000;
        while (messages.length < 3 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 5));
        expect(messages).toEqual([
          [store.recordKey(ids[0]!), 'C'],
          [store.recordKey(ids[1]!), 'R'],
          [store.recordKey(ids[2]!), 'F'],
        ]);
      } finally {
        subscriber.disconnect();
      }
    });

    it('a client with its own keyPrefix: notifications still reach the wait (the prefix is taken off)', async () => {
      const prefixed = new Redis(url, { keyPrefix: `${prefix}-client:` });
      const notifications = new OutcomeNotifications(prefixed, { subscribeTimeoutMs: 10_000, idleMs: 1000 });
      try {
        const channel = 'spec:prefixed-client';
        let woken!: () => void;
        const wake = new Promise<void>((resolve) => {
          woken = resolve;
        });
        const stop = await notifications.listen(channel, () => woken());
        // What complete.lua publishes when called through the prefixed client: the prefixed key.
        await redis.spublish(`${prefix}-client:${channel}`, 'C');
        await wake; // never resolves (the test times out) when the lookup misses the prefixed name
        stop();
      } finally {
        notifications.close();
        prefixed.disconnect();
      }
    });

    it('a store on a client with keyPrefix: waits settle through the notification, with the result', async () => {
      const prefixed = new Redis(url, { keyPrefix: `${prefix}-client:` });
      const prefixedStore = new RedisIdempotencyStore({ redis: prefixed }, { keyPrefix: prefix });
      try {
        const id = { scope: 'spec', key: 'prefixed-wait' };
        const held = await prefixedStore.claim(id, options);
        const waiting = prefixedStore.waitForOutcome(id, options, { timeoutMs: 20_000 });
        setTimeout(
          () =>
            void prefixedStore.complete(id, held.fencingToken, { retentionMs: RETENTION_MS, result: 'j3' }),
          50,
        );
        expect(await waiting).toMatchObject({ outcome: 'DUPLICATE', result: 'j3' });
      } finally {
        prefixedStore.close();
        await deleteByPrefix(redis, `${prefix}-client:`);
        prefixed.disconnect();
      }
    });

    it('outcomeNotifications: false waits by polling alone, with the same answers', async () => {
      const polling = new RedisIdempotencyStore(
        { redis },
        { keyPrefix: prefix, outcomeNotifications: false },
      );
      const id = { scope: 'spec', key: 'polling-only' };
      const held = await polling.claim(id, options);
      const waiting = polling.waitForOutcome(id, options, { timeoutMs: 20_000 });
      setTimeout(
        () => void polling.complete(id, held.fencingToken, { retentionMs: RETENTION_MS, result: 'j2' }),
        100,
      );
      expect(await waiting).toMatchObject({ outcome: 'DUPLICATE', result: 'j2' });
    });

    it('falls back to EVAL after SCRIPT FLUSH, for single calls and for the claimMany pipeline', async () => {
      // SCRIPT FLUSH empties the script cache of the whole server: on a server of its own, so that no suite
      // running at the same time (Jest runs two) reloads a script in between or meets a NOSCRIPT of ours.
      const server = await RedisServer.start();
      const own = new Redis(server.url);
      try {
        const ownStore = new RedisIdempotencyStore({ redis: own }, { keyPrefix: prefix });
        await own.script('FLUSH');
        const a = await ownStore.claim({ scope: 'spec', key: 'noscript-1' }, options);
        expect(a.outcome).toBe('ACQUIRED');
        await own.script('FLUSH');
        const many = await ownStore.claimMany(
          ['noscript-2', 'noscript-3'].map((key) => ({ id: { scope: 'spec', key }, options })),
        );
        expect(many.map((r) => r.outcome)).toEqual(['ACQUIRED', 'ACQUIRED']);
        await own.script('FLUSH');
        const done = await ownStore.complete({ scope: 'spec', key: 'noscript-1' }, a.fencingToken, options);
        expect(done.ok).toBe(true);
      } finally {
        own.disconnect();
        await server.dispose();
      }
    });

    it('answers a record of the wrong type with UNEXPECTED_STORE_REPLY, not a crash or a state', async () => {
      const id = { scope: 'spec', key: 'wrongtype' };
      await redis.set(store.recordKey(id), 'not a hash');
      await expect(store.claim(id, options)).rejects.toMatchObject({
        code: 'UNEXPECTED_STORE_REPLY',
        retryable: false,
      });
    });

    it('claimMany with one claim refused (a key of the wrong type): rejects, and gives back the claims the pipeline took (they were left IN_PROGRESS: CONFLICT until their lease lapsed)', async () => {
      const ids = ['batch-1', 'batch-wrongtype', 'batch-3'].map((key) => ({ scope: 'spec', key }));
      await redis.set(store.recordKey(ids[1]!), 'not a hash');
      const stale = { scope: 'spec', key: 'batch-stale' };
      const lapsed = (await store.claim(stale, { ...options, leaseMs: 1 })) as AcquiredReply;
      await redisClock(redis).passTime(lapsed.leaseExpiresAtMs);
      for (const reserve of [true, false]) {
        await expect(
          store.claimMany([...ids, stale].map((id) => ({ id, options: { ...options, reserve } }))),
        ).rejects.toMatchObject({ code: 'UNEXPECTED_STORE_REPLY' });
      }
      // Given back unrun: claimable at once, no attempt spent; the lapsed handler's key still says stale.
      expect(await store.claim(ids[0]!, options)).toMatchObject({ outcome: 'ACQUIRED', attempt: 1 });
      expect(await store.claim(ids[2]!, options)).toMatchObject({ outcome: 'ACQUIRED', attempt: 1 });
      expect(await store.claim(stale, options)).toMatchObject({ outcome: 'ACQUIRED_STALE', attempt: 2 });
    });

    it('registers each script once per client under a versioned command name; stores share a client', async () => {
      const second = new RedisIdempotencyStore({ redis }, { keyPrefix: `${prefix}-2` });
      const r = await second.claim({ scope: 'spec', key: 'shared-client' }, options);
      expect(r.outcome).toBe('ACQUIRED');
      const names = Object.keys(redis).filter((n) => n.startsWith('idem_') && !n.endsWith('Buffer'));
      expect(names.sort()).toEqual(
        ['claim', 'complete', 'extend', 'fail', 'giveBack', 'markDeadLettered', 'release', 'start'].map((n) =>
          expect.stringMatching(new RegExp(`^idem_${n}_[0-9a-f]{8}$`)),
        ),
      );
    });
  });
});
