import { MemoryIdempotencyStore } from '../src';
import { type ContractTarget, describeStoreContract } from './contract/store-contract';

// The same table the Redis suites run (integration-tests/src/core/store-contract.redis.test.ts), here on
// the in-memory store with a fake clock: both stores must share the semantics of lua/*.lua.
let clock = 1_700_000_000_000;
const store = new MemoryIdempotencyStore({ now: () => clock });
const target: ContractTarget = {
  store,
  clock: {
    now: async () => clock,
    passTime: async (atMs) => {
      clock = Math.max(clock, atMs + 1);
    },
  },
  // The memory store has no DEL: its clock passes the record's TTL, so it forgets the record.
  loseRecord: async (id) => {
    const rec = await store.get(id);
    if (rec) clock += rec.ttlMs;
  },
};

describeStoreContract(
  'store contract: MemoryIdempotencyStore (fake clock)',
  () => target,
  () => ({ shortLeaseMs: 100, shortRetentionMs: 100, ttlSlackMs: 0, scope: 'contract' }),
);
