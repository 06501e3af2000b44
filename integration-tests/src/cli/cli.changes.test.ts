import { RedisIdempotencyStore } from '@idempotent-consumer/core';
import Redis from 'ioredis';
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
  },
);
