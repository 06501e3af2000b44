import { RedisIdempotencyStore } from '@idempotent-consumer/core';
import Redis from 'ioredis';
import { RedisServer } from '../../support/redis-server';
import { describeWithServices } from '../../support/service';
import { deleteByPrefix, uniquePrefix } from '../core/redis-target';
import { cli } from './run-cli';

const LEASE_MS = 600_000;

// What release and purge change when the record, or Redis, does not stay as the operator saw it.
describeWithServices(
  ['redis'],
  'idempotent-consumer CLI: changes under races and failures',
  ({ redis: url }) => {
    const prefix = uniquePrefix('cli-changes');
    const scope = 'payments';
    let redis: Redis;
    let store: RedisIdempotencyStore;

    beforeAll(() => {
      redis = new Redis(url);
      store = new RedisIdempotencyStore({ redis }, { keyPrefix: prefix });
    });

    afterAll(async () => {
      await deleteByPrefix(redis, prefix);
      await redis.quit();
    });

    it('release leaves alone a record that its worker failed while the operator read the prompt (same token, another state)', async () => {
      const id = { scope, key: 'failed-meanwhile' };
      const claim = await store.claim(id, { leaseMs: LEASE_MS, retentionMs: 60_000 });
      // The operator is shown the IN_PROGRESS record; before they answer, its handler ends with a decline
      // (FAILED keeps the claim's fencing token).
      const run = await cli(url, ['--prefix', prefix, '--json', 'release', scope, id.key], async () => {
        expect(
          await store.fail(id, claim.fencingToken, { retentionMs: 60_000, error: 'card declined' }),
        ).toMatchObject({
          ok: true,
        });
        return 'y\n';
      });
      expect(run.stderr).toMatch(/\(IN_PROGRESS, a worker's lease has \d+ ms left/);
      expect(run.json()).toMatchObject({
        outcome: 'TOKEN_CHANGED',
        state: 'FAILED',
        fencingToken: claim.fencingToken,
      });
      expect(run.status).toBe(3);
      expect(await store.get(id)).toMatchObject({ state: 'FAILED', error: 'card declined', attempt: 1 });
    });

    it('inspect and list show a record released abandoned: the next claim is ACQUIRED_STALE', async () => {
      const id = { scope, key: 'stuck' };
      await store.claim(id, { leaseMs: LEASE_MS, retentionMs: 60_000 }); // its handler started, then hung
      const released = await cli(url, ['--prefix', prefix, '--json', '--yes', 'release', scope, id.key]);
      expect(released.json()).toMatchObject({ outcome: 'OK', previousState: 'IN_PROGRESS' });
      expect(await store.get(id)).toMatchObject({ state: 'RELEASED', abandoned: true });
      const json = await cli(url, ['--prefix', prefix, '--json', 'inspect', scope, id.key]);
      // Before: no `abandoned` field, and nothing in the table: the record looked like any retry.
      expect(json.json()).toMatchObject({ state: 'RELEASED', abandoned: true });
      const human = await cli(url, ['--prefix', prefix, 'inspect', scope, id.key]);
      expect(human.stdout).toMatch(/│ abandoned\s+│ yes: the last handler may be partial/);
      expect(human.stdout).toContain('ACQUIRED_STALE');
      const listed = await cli(url, ['--prefix', prefix, '--json', 'list', scope, '--state', 'RELEASED']);
      expect(listed.json<{ records: unknown[] }>().records).toEqual([
        expect.objectContaining({ key: id.key, abandoned: true }),
      ]);
      const next = await store.claim(id, { leaseMs: LEASE_MS, retentionMs: 60_000 });
      expect(next.outcome).toBe('ACQUIRED_STALE');
      const fresh = await cli(url, ['--prefix', prefix, '--json', 'inspect', scope, id.key]);
      expect(fresh.json()).toMatchObject({ state: 'IN_PROGRESS', abandoned: false });
      await store.release(id, next.fencingToken, { retentionMs: 60_000 });
    });

    it('a scope holding a key longer than 512 bytes (a store with a larger maxKeyBytes): stats, list, inspect and purge see it', async () => {
      const longScope = 'long-keys';
      const long = 'k'.repeat(600);
      const wide = new RedisIdempotencyStore({ redis }, { keyPrefix: prefix, maxKeyBytes: 2048 });
      for (const key of [long, 'short']) {
        const claim = await wide.claim({ scope: longScope, key }, { leaseMs: LEASE_MS, retentionMs: 60_000 });
        await wide.complete({ scope: longScope, key }, claim.fencingToken, { retentionMs: 60_000 });
      }
      const run = (args: string[]) => cli(url, ['--prefix', prefix, '--json', ...args]);
      // Before: each failed with exit status 1, "The idempotency key is 600 bytes long; at most 512 are
      // accepted": one such record made the whole scope unreadable, and unpurgeable.
      const stats = await run(['stats', longScope]);
      expect(stats.stderr).toBe('');
      expect(stats.status).toBe(0);
      expect(stats.json()).toMatchObject({ total: 2, states: { COMPLETED: 2 } });
      const listed = await run(['list', longScope]);
      expect(listed.status).toBe(0);
      expect(
        listed
          .json<{ records: { key: string }[] }>()
          .records.map((r) => r.key)
          .sort(),
      ).toEqual([long, 'short']);
      const inspected = await run(['inspect', longScope, long]);
      expect(inspected.status).toBe(0);
      expect(inspected.json()).toMatchObject({ found: true, state: 'COMPLETED' });
      const purged = await run(['--yes', 'purge', longScope]);
      expect(purged.status).toBe(0);
      expect(purged.json()).toEqual({ scope: longScope, deleted: 2, skipped: {} });
    });

    it('an empty key, scope or prefix is bad usage (exit status 2), not a Redis failure (1)', async () => {
      for (const args of [
        ['inspect', scope, ''],
        ['release', '', 'k'],
        ['--prefix', '', 'stats', scope],
      ]) {
        const run = await cli(url, ['--json', ...args]);
        expect(run.stderr).toMatch(/must not be empty \[INVALID_IDEMPOTENCY_KEY\]/);
        expect(run.status).toBe(2);
        expect(run.stdout).toBe('');
      }
    });

    it('a URL whose database Redis refuses is an error, not a purge of database 0', async () => {
      const id = { scope, key: 'in-db-0' };
      const claim = await store.claim(id, { leaseMs: LEASE_MS, retentionMs: 60_000 });
      await store.complete(id, claim.fencingToken, { retentionMs: 60_000 });
      const otherDb = new URL(url);
      otherDb.pathname = '/99999'; // out of range on any usual server (`databases`, default 16)
      const run = await cli(otherDb.toString(), ['--prefix', prefix, '--json', '--yes', 'purge', scope]);
      expect(run.stderr).toMatch(/DB index is out of range/);
      expect(run.status).toBe(1);
      expect(run.stdout).toBe('');
      expect(await store.get(id)).toMatchObject({ state: 'COMPLETED' });
    });

    describe('on a Redis that refuses some of the deletions', () => {
      let server: RedisServer;
      let own: Redis;

      beforeAll(async () => {
        server = await RedisServer.start();
        own = new Redis(server.url);
      });

      afterAll(async () => {
        own?.disconnect();
        await server?.dispose();
      });

      it('purge reports what it deleted before a failure, and exits 1', async () => {
        const ownStore = new RedisIdempotencyStore({ redis: own }, { keyPrefix: prefix });
        for (const key of ['a-1', 'a-2', 'a-3', 'b-1', 'b-2']) {
          const claim = await ownStore.claim({ scope, key }, { leaseMs: LEASE_MS, retentionMs: 60_000 });
          await ownStore.complete({ scope, key }, claim.fencingToken, { retentionMs: 60_000 });
        }
        // An operator account that may read every key but change only the a-* records: the b-* purges fail
        // (NOPERM) after the a-* ones were deleted, as a failover or a timeout would fail them.
        await own.call(
          'ACL',
          'SETUSER',
          'operator',
          'on',
          '>pw',
          '+@all',
          '%R~*',
          `~${prefix}:${scope.length}:${scope}:a-*`,
        );
        const operatorUrl = `redis://operator:pw@127.0.0.1:${server.port}`;
        const run = await cli(operatorUrl, ['--prefix', prefix, '--json', '--yes', 'purge', scope]);
        expect(run.status).toBe(1);
        expect(run.stderr).toMatch(/NOPERM/);
        expect(run.json()).toMatchObject({ scope, deleted: 3, failed: 2 });
        expect((await own.keys(`${prefix}:*`)).sort()).toEqual(
          ['b-1', 'b-2'].map((key) => `${prefix}:${scope.length}:${scope}:${key}`),
        );
      });

      it('an account refused INFO still runs with --no-cluster (the operator says it is standalone)', async () => {
        await own.call('ACL', 'SETUSER', 'no-info', 'on', '>pw', '+@all', '-info', '~*');
        const url = `redis://no-info:pw@127.0.0.1:${server.port}`;
        const asked = await cli(url, ['--prefix', prefix, '--json', 'stats', scope]);
        expect(asked.status).toBe(1);
        expect(asked.stderr).toMatch(/NOPERM/);
        const told = await cli(url, ['--prefix', prefix, '--json', '--no-cluster', 'stats', scope]);
        expect(told.stderr).toBe('');
        expect(told.status).toBe(0);
        expect(told.json()).toMatchObject({ scope, total: 2 });
      });
    });
  },
);
