import { Idempotency, MemoryIdempotencyStore } from '../src';
import { describeInputTable } from './contract/input-table';

// The same table the Redis suite runs (integration-tests/src/core/input-table.redis.test.ts).
const store = new MemoryIdempotencyStore();
describeInputTable(
  'every input gets a typed error or a recorded outcome: MemoryIdempotencyStore',
  () => ({ store, runner: (maxAttempts) => new Idempotency({ store }, { maxAttempts }) }),
  () => 'inputs',
);
