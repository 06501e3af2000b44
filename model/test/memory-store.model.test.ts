import { MemoryIdempotencyStore } from '@idempotent-consumer/core';
import { LEASE_MS, RETENTION_MS, runModelBased } from '../src/model-based';

// The memory store held to the model (model/src/record-model.ts), reply by reply and field by field, on
// random sequences with lost replies, late commands, crashes, lapsed leases and lost records. The memory
// store has no operator scripts (admin-release, admin-purge): the Redis suite runs those.
// MODEL_RUNS sets the number of sequences (default 2000).
const runs = Number(process.env.MODEL_RUNS ?? 2000);

it(`the memory store answers as the model does: ${runs} sequences`, async () => {
  await runModelBased({
    runs,
    admin: false,
    newTarget: async (sequence) => {
      let clock = 1_800_000_000_000;
      const store = new MemoryIdempotencyStore({ now: () => clock });
      return {
        store,
        id: { scope: 'model', key: `k${sequence}` },
        now: async () => clock,
        lapse: async () => {
          clock += 2 * LEASE_MS;
        },
        // The memory store has no DEL: its clock passes the record's TTL, so it forgets the record.
        lose: async () => {
          clock += LEASE_MS + RETENTION_MS + 1;
        },
      };
    },
  });
}, 300_000);
