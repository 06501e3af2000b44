import { RedisIdempotencyAdmin } from '@idempotent-consumer/core';
import { LEASE_MS, runModelBased } from '../../../model/src/model-based';
import { describeWithServices } from '../../support/service';
import { serverTimeMs, useRedisStore } from './redis-target';

// The Lua scripts on real Redis held to the model (model/src/record-model.ts), reply by reply and field by
// field: random sequences of claims and fenced writes of three workers, lost replies, late commands,
// crashes, lapsed leases (the lease expiry set in the past, as the server clock passing it), lost records
// (DEL) and the operator's admin-release and admin-purge. Each sequence works on a key of its own.
// MODEL_RUNS sets the number of sequences (default 300; the model's README gives the big run).
const runs = Number(process.env.MODEL_RUNS ?? 300);

describeWithServices(['redis'], 'the Lua scripts answer as the model does', ({ redis: url }) => {
  const suite = useRedisStore(url, 'model-based');

  it(`${runs} sequences`, async () => {
    const admin = new RedisIdempotencyAdmin({ redis: suite.redis }, { keyPrefix: suite.prefix });
    await runModelBased({
      runs,
      admin: true,
      newTarget: async (sequence) => {
        const id = { scope: 'model', key: `k${sequence}` };
        const key = suite.store.recordKey(id);
        return {
          store: suite.store,
          id,
          now: () => serverTimeMs(suite.redis),
          lapse: async () => {
            if ((await suite.redis.hget(key, 's')) === 'P') await suite.redis.hset(key, 'e', '1');
          },
          lose: async () => {
            await suite.redis.del(key);
          },
          admin: {
            release: (expectedFencingToken, expectedState) =>
              admin.release(id, { retentionMs: 86_400_000, expectedFencingToken, expectedState }),
            purge: (states) => admin.purge(id, { states }),
          },
        };
      },
    });
    expect(LEASE_MS).toBeGreaterThan(0);
  }, 1_200_000);
});
