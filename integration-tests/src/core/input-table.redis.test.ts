import { Idempotency } from '@idempotent-consumer/core';
import { describeInputTable } from '../../../packages/core/test/contract/input-table';
import { describeWithServices } from '../../support/service';
import { useRedisStore } from './redis-target';

// The bad-input table (packages/core/test/contract/input-table.ts) on real Redis.
describeWithServices(['redis'], 'bad inputs on RedisIdempotencyStore', ({ redis: url }) => {
  const suite = useRedisStore(url, 'inputs');

  describeInputTable(
    'every input gets a typed error or a recorded outcome: RedisIdempotencyStore',
    () => {
      const { store } = suite;
      return { store, runner: (maxAttempts) => new Idempotency({ store }, { maxAttempts }) };
    },
    () => 'inputs',
  );
});
