import { Idempotency, RedisIdempotencyStore } from '@idempotent-consumer/core';
import Redis from 'ioredis';
import { describeInputTable } from '../../../packages/core/test/contract/input-table';
import { describeWithServices } from '../../support/service';
import { deleteByPrefix, uniquePrefix } from './redis-target';

// The bad-input table (packages/core/test/contract/input-table.ts) on real Redis.
describeWithServices(['redis'], 'bad inputs on RedisIdempotencyStore', ({ redis: url }) => {
  let redis: Redis;
  let store: RedisIdempotencyStore;
  const prefix = uniquePrefix('inputs');
  beforeAll(() => {
    redis = new Redis(url);
    store = new RedisIdempotencyStore({ redis }, { keyPrefix: prefix });
  });
  afterAll(async () => {
    await deleteByPrefix(redis, prefix);
    await redis.quit();
  });

  describeInputTable(
    'every input gets a typed error or a recorded outcome: RedisIdempotencyStore',
    () => ({ store, runner: (maxAttempts) => new Idempotency({ store }, { maxAttempts }) }),
    () => 'inputs',
  );
});
