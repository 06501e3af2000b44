import { RedisIdempotencyStore } from '@idempotent-consumer/core';
import Redis from 'ioredis';
import {
  type ContractTarget,
  describeStoreContract,
  LONG_LEASE_MS,
  RETENTION_MS,
} from '../../../packages/core/test/contract/store-contract';
import { describeWithServices } from '../../support/service';
import { deleteByPrefix, redisContractTarget, serverTimeMs, uniquePrefix } from './redis-target';

// The store contract (one row per transition of DESIGN.md's state diagram) on real Redis: the same table
// the unit project runs on MemoryIdempotencyStore, with short leases expired on the server clock.
describeWithServices(['redis'], 'store contract: RedisIdempotencyStore on Redis', ({ redis: url }) => {
  for (const enableAutoPipelining of [false, true]) {
    describe(`enableAutoPipelining: ${enableAutoPipelining}`, () => {
      let redis: Redis;
      let target: ContractTarget;
      const prefix = uniquePrefix(`contract-${enableAutoPipelining}`);
      beforeAll(() => {
        redis = new Redis(url, { enableAutoPipelining });
        target = redisContractTarget(redis, prefix);
      });
      afterAll(async () => {
        await deleteByPrefix(redis, prefix);
        await redis.quit();
      });

      describeStoreContract(
        'RedisIdempotencyStore',
        () => target,
        () => ({ shortLeaseMs: 100, shortRetentionMs: 100, ttlSlackMs: 2000, scope: 'contract' }),
      );
    });
  }

  describe('Redis specifics', () => {
    let redis: Redis;
    let store: RedisIdempotencyStore;
    const prefix = uniquePrefix('specifics');
    const options = { leaseMs: LONG_LEASE_MS, retentionMs: RETENTION_MS };
    beforeAll(() => {
      redis = new Redis(url);
      store = new RedisIdempotencyStore({ redis }, { keyPrefix: prefix });
    });
    afterAll(async () => {
      await deleteByPrefix(redis, prefix);
      await redis.quit();
    });

    it('keeps the record in one hash with the documented short fields, TTL from the server', async () => {
      const id = { scope: 'spec', key: 'fields' };
      const claim = await store.claim(id, { ...options, fingerprint: 'f'.repeat(64) });
      const key = store.recordKey(id);
      expect(await redis.type(key)).toBe('hash');
      const fields = await redis.hgetall(key);
      expect(fields).toEqual({
        s: 'P',
        t: '1',
        a: '1',
        e: String((claim as { leaseExpiresAtMs: number }).leaseExpiresAtMs),
        u: expect.stringMatching(/^\d{13}$/),
        c: expect.stringMatching(/^\d{13}$/),
        f: 'f'.repeat(64),
      });
      const now = await serverTimeMs(redis);
      expect(Math.abs(Number(fields.u) - now)).toBeLessThan(1000);
      expect(await redis.pttl(key)).toBeGreaterThan(LONG_LEASE_MS + RETENTION_MS - 2000);
    });

    it('falls back to EVAL after SCRIPT FLUSH, for single calls and for the claimMany pipeline', async () => {
      await redis.script('FLUSH');
      const a = await store.claim({ scope: 'spec', key: 'noscript-1' }, options);
      expect(a.outcome).toBe('ACQUIRED');
      await redis.script('FLUSH');
      const many = await store.claimMany(
        ['noscript-2', 'noscript-3'].map((key) => ({ id: { scope: 'spec', key }, options })),
      );
      expect(many.map((r) => r.outcome)).toEqual(['ACQUIRED', 'ACQUIRED']);
      await redis.script('FLUSH');
      const done = await store.complete({ scope: 'spec', key: 'noscript-1' }, a.fencingToken, options);
      expect(done.ok).toBe(true);
    });

    it('answers a record of the wrong type with UNEXPECTED_STORE_REPLY, not a crash or a state', async () => {
      const id = { scope: 'spec', key: 'wrongtype' };
      await redis.set(store.recordKey(id), 'not a hash');
      await expect(store.claim(id, options)).rejects.toMatchObject({
        code: 'UNEXPECTED_STORE_REPLY',
        retryable: false,
      });
    });

    it('registers each script once per client under a versioned command name; stores share a client', async () => {
      const second = new RedisIdempotencyStore({ redis }, { keyPrefix: `${prefix}-2` });
      const r = await second.claim({ scope: 'spec', key: 'shared-client' }, options);
      expect(r.outcome).toBe('ACQUIRED');
      const names = Object.keys(redis).filter((n) => n.startsWith('idem_') && !n.endsWith('Buffer'));
      expect(names.sort()).toEqual(
        ['claim', 'complete', 'extend', 'fail', 'release'].map((n) =>
          expect.stringMatching(new RegExp(`^idem_${n}_[0-9a-f]{8}$`)),
        ),
      );
    });
  });
});
