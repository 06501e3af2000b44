import { RedisIdempotencyStore } from '@idempotent-consumer/core';
import { Cluster } from 'ioredis';
import {
  type ContractTarget,
  describeStoreContract,
  LONG_LEASE_MS,
  RETENTION_MS,
} from '../../../packages/core/test/contract/store-contract';
import { waitFor } from '../../support/net';
import { describeWithRedisCluster, RedisCluster } from '../../support/redis-cluster';
import { redisContractTarget, uniquePrefix } from './redis-target';

// The store contract on a real Redis Cluster (3 masters, 3 replicas) that this suite starts on free ports:
// every script touches one key, so it runs on whichever node owns the key's slot, without hash tags.
describeWithRedisCluster(
  'store contract: RedisIdempotencyStore on a local Redis Cluster (3 masters + 3 replicas)',
  () => {
    let cluster: RedisCluster;
    let redis: Cluster;
    let target: ContractTarget;
    const prefix = uniquePrefix('cluster');
    const options = { leaseMs: LONG_LEASE_MS, retentionMs: RETENTION_MS };

    beforeAll(async () => {
      cluster = await RedisCluster.start();
      redis = new Cluster(cluster.nodes, { enableAutoPipelining: true, clusterRetryStrategy: () => 100 });
      await waitFor('ioredis Cluster ready', () => redis.status === 'ready', 10_000);
      target = redisContractTarget(redis, prefix);
    }, 60_000);

    afterAll(async () => {
      await redis?.quit().catch(() => undefined);
      await cluster?.stop();
    });

    describeStoreContract(
      'RedisIdempotencyStore on Cluster (enableAutoPipelining)',
      () => target,
      () => ({ shortLeaseMs: 100, shortRetentionMs: 100, ttlSlackMs: 2000, scope: 'contract' }),
    );

    it('ping asks every master: one master full (OOM) makes it reject every time, since claims on its slots fail (was one random master: the gate reopened into the same refusals)', async () => {
      const store = target.store;
      const masters = redis.nodes('master');
      expect(masters).toHaveLength(3);
      for (const full of masters) {
        await full.config('SET', 'maxmemory-policy', 'noeviction', 'maxmemory', '1');
        try {
          const pings = await Promise.allSettled(Array.from({ length: 6 }, () => store.ping()));
          expect(pings.map((p) => p.status)).toEqual(Array(6).fill('rejected'));
          expect((pings[0] as PromiseRejectedResult).reason).toMatchObject({ code: 'STORE_UNAVAILABLE' });
        } finally {
          await full.config('SET', 'maxmemory', '0');
        }
      }
      await expect(store.ping()).resolves.toBeUndefined();
    });

    it('a claim its master applies after commandTimeoutMs (CLIENT PAUSE WRITE) is given back once it answers, on the same node', async () => {
      const store = new RedisIdempotencyStore(
        { redis },
        { keyPrefix: `${prefix}-late`, commandTimeoutMs: 200 },
      );
      const id = { scope: 'unanswered', key: 'k' };
      const masters = redis.nodes('master');
      await Promise.all(masters.map((m) => m.client('PAUSE', 800, 'WRITE')));
      await expect(store.claim(id, options)).rejects.toMatchObject({ code: 'STORE_UNAVAILABLE' });
      await waitFor('the give-back', () => store.pendingReleases === 0, 10_000);
      expect(await store.get(id)).toMatchObject({ state: 'RELEASED', attempt: 0 });
      expect(await store.claim(id, options)).toMatchObject({ outcome: 'ACQUIRED', attempt: 1 });
    });

    it('claimMany across slots: 300 keys land on all three masters, replies in request order', async () => {
      const store = target.store;
      const ids = Array.from({ length: 300 }, (_, i) => ({ scope: 'slots', key: `k${i}` }));
      const first = await store.claimMany(ids.map((id) => ({ id, options })));
      expect(first.map((r) => r.outcome)).toEqual(ids.map(() => 'ACQUIRED'));
      const second = await store.claimMany(ids.map((id) => ({ id, options })));
      expect(second.map((r) => r.outcome)).toEqual(ids.map(() => 'CONFLICT'));
      const perMaster = await Promise.all(
        redis.nodes('master').map(async (node) => (await node.keys(`${prefix}:5:slots:*`)).length),
      );
      expect(perMaster).toHaveLength(3);
      for (const n of perMaster) expect(n).toBeGreaterThan(30);
      expect(perMaster.reduce((a, b) => a + b, 0)).toBe(300);
    });

    it('claimMany while one master refuses writes (OOM): rejects, and gives back the claims the other masters took (they were left IN_PROGRESS: CONFLICT until their lease lapsed)', async () => {
      const store = target.store;
      const ids = Array.from({ length: 30 }, (_, i) => ({ scope: 'partial', key: `k${i}` }));
      const full = redis.nodes('master')[0]!;
      await full.config('SET', 'maxmemory-policy', 'noeviction', 'maxmemory', '1');
      try {
        for (const reserve of [true, false]) {
          await expect(
            store.claimMany(ids.map((id) => ({ id, options: { ...options, reserve } }))),
          ).rejects.toMatchObject({ code: 'STORE_UNAVAILABLE' });
        }
      } finally {
        await full.config('SET', 'maxmemory', '0');
      }
      // The master answers again: the redelivered batch claims every key, none spent an attempt.
      const again = await store.claimMany(ids.map((id) => ({ id, options })));
      expect(again.map((r) => r.outcome)).toEqual(ids.map(() => 'ACQUIRED'));
      expect(again.map((r) => r.attempt)).toEqual(ids.map(() => 1));
    });

    it('outcome notifications reach a sharded subscriber on the node that owns the key, for keys on every master', async () => {
      const store = target.store as RedisIdempotencyStore;
      const subscriber = redis.duplicate(undefined, { shardedSubscribers: true });
      subscriber.on('error', () => {});
      try {
        const messages: string[] = [];
        subscriber.on('smessage', (channel: string) => messages.push(channel));
        const ids = Array.from({ length: 12 }, (_, i) => ({ scope: 'notify', key: `k${i}` }));
        for (const id of ids) await subscriber.ssubscribe(store.recordKey(id));
        for (const id of ids) {
          const claim = await store.claim(id, options);
          await store.complete(id, claim.fencingToken, { retentionMs: RETENTION_MS });
        }
        await waitFor('12 notifications', () => messages.length === 12, 10_000);
        expect(messages.sort()).toEqual(ids.map((id) => store.recordKey(id)).sort());
      } finally {
        subscriber.disconnect();
      }
    });

    it('CLUSTER FAILOVER: a completed record survives on the promoted replica; claims meanwhile stay correct', async () => {
      const store = new RedisIdempotencyStore(
        { redis },
        { keyPrefix: `${prefix}-failover`, commandTimeoutMs: 1000 },
      );
      const id = { scope: 'failover', key: 'order-1' };
      const claim = await store.claim(id, options);
      expect(claim.outcome).toBe('ACQUIRED');
      expect(
        await store.complete(id, claim.fencingToken, { retentionMs: RETENTION_MS, result: 'j"paid"' }),
      ).toMatchObject({ ok: true });

      // The master that owns the record's slot, and its replica (CLUSTER KEYSLOT + CLUSTER SLOTS).
      const slot = Number(await redis.cluster('KEYSLOT', store.recordKey(id)));
      const ranges = (await redis.cluster('SLOTS')) as unknown as [
        number,
        number,
        [string, number],
        [string, number],
      ][];
      const range = ranges.find(([start, end]) => start <= slot && slot <= end)!;
      const masterPort = range[2][1];
      const replicaPort = range[3][1];
      expect(cluster.ports).toEqual(expect.arrayContaining([masterPort, replicaPort]));
      expect(await cluster.role(replicaPort)).toBe('slave');

      // Claims on fresh keys keep going during the failover: each is ACQUIRED or a typed retryable error.
      let stop = false;
      const during: string[] = [];
      const load = (async () => {
        for (let i = 0; !stop; i++) {
          try {
            during.push((await store.claim({ scope: 'failover', key: `during-${i}` }, options)).outcome);
          } catch (error) {
            during.push((error as { code?: string }).code ?? String(error));
          }
        }
      })();

      // A manual failover is aborted when the replica cannot catch up in time (a loaded machine): try again.
      const promoted = async () =>
        (await cluster.role(replicaPort)) === 'master' && (await cluster.role(masterPort)) === 'slave';
      for (let attempt = 1; ; attempt++) {
        expect((await cluster.cli(replicaPort, 'CLUSTER', 'FAILOVER')).trim()).toBe('OK');
        try {
          await waitFor('the replica to become master', promoted, 8_000, 50);
          break;
        } catch (error) {
          if (attempt === 3 || (await cluster.role(replicaPort)) === 'master') throw error;
        }
      }
      // A fresh claim in the moved slot reaches the new master through ioredis' MOVED handling.
      await waitFor(
        'a claim answered by the new master',
        async () => {
          try {
            return (await store.claim(id, options)).outcome === 'DUPLICATE';
          } catch {
            return false;
          }
        },
        20_000,
        100,
      );
      stop = true;
      await load;

      expect(await store.claim(id, options)).toMatchObject({
        outcome: 'DUPLICATE',
        result: 'j"paid"',
        fencingToken: claim.fencingToken,
      });
      expect(during.length).toBeGreaterThan(0);
      expect(during.filter((o) => o !== 'ACQUIRED' && o !== 'STORE_UNAVAILABLE')).toEqual([]);
      process.stderr.write(
        `[cluster] failover ${masterPort} → ${replicaPort}: ${during.length} claims during it, ` +
          `${during.filter((o) => o !== 'ACQUIRED').length} unavailable\n`,
      );
    });
  },
);
