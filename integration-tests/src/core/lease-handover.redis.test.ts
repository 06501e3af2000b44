import { performance } from 'node:perf_hooks';
import {
  type ExtendReply,
  Idempotency,
  type IdempotencyStore,
  type RecordId,
} from '@idempotent-consumer/core';
import { LeaseKeeperSet } from '@idempotent-consumer/core/kit';
import { describeWithServices } from '../../support/service';
import { useRedisStore } from './redis-target';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, Math.max(0, ms)));

const LEASE_MS = 3_000; // heartbeat interval: 1000 ms
const EXTEND_REPLY_MS = 400; // under half an interval: the keeper's first beat always has time for it
const LEFT_MS = 400; // what is left of the claim's own lease, at most, when it is handed to execute

/** The runner's store: Redis, with every `extend` answered `EXTEND_REPLY_MS` after Redis applied it. */
function slowExtend(store: IdempotencyStore): IdempotencyStore {
  return new Proxy(store, {
    get(target, property, receiver) {
      if (property === 'extend') {
        return async (...args: Parameters<IdempotencyStore['extend']>): Promise<ExtendReply> => {
          const reply = await target.extend(...args);
          await sleep(EXTEND_REPLY_MS);
          return reply;
        };
      }
      const value = Reflect.get(target, property, receiver);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
}

// A counted claim that a LeaseKeeperSet kept alive in Redis, handed over with its own reply only (its lease
// counted from the claim: execute is not given the set's renewedLease) shortly before that lease's end, to a runner whose extensions answer slowly.
// Before the fix the keeper's first beat came at half of what was left, its reply after the local deadline,
// and the handler was aborted with LeaseLostError while Redis still held the lease. Only an upper bound on
// what is left is arranged (the wait never ends early), so a busy machine cannot make the fixed code fail;
// it can only leave nothing of the lease (more than LEFT_MS late), where the old code extended too.
describeWithServices(
  ['redis'],
  'a counted claim handed over from a LeaseKeeperSet near its lease end',
  ({ redis }) => {
    const suite = useRedisStore(redis, 'lease-handover');

    it('runs under a renewed lease: no abort, completed, no leaseLost', async () => {
      const idempotency = new Idempotency(
        { store: slowExtend(suite.store), logger: false },
        { leaseMs: LEASE_MS, retentionMs: 60_000 },
      );
      const lost: unknown[] = [];
      idempotency.on('leaseLost', (event) => lost.push(event));
      const id: RecordId = { scope: 'handover', key: `k-${Date.now()}` };
      const [reply] = await idempotency.claimMany([id], { reserve: false });
      const claimedAt = performance.now(); // the claim was requested before this: its lease ends earlier
      if (reply?.outcome !== 'ACQUIRED') throw new Error(`got ${reply?.outcome}`);
      // The set extends through a runner on Redis itself (its extensions are not the subject here).
      const keeping = new Idempotency({ store: suite.store, logger: false }, { retentionMs: 60_000 });
      const set = new LeaseKeeperSet<number>(keeping, { leaseMs: LEASE_MS, heartbeatIntervalMs: 1_000 });
      set.add(0, id, reply);
      set.start();
      try {
        await sleep(claimedAt + LEASE_MS - LEFT_MS - performance.now());
        // Handed to execute without the set's last extension: the lease counts from the claim.
        const taken = (await set.take(0))?.claim;
        expect(taken).toBe(reply);
        // The set renewed the lease in Redis past the end of the claim's own lease.
        const record = await suite.store.get(id);
        expect(record?.leaseExpiresAtMs).toBeGreaterThan(reply.leaseExpiresAtMs);
        let aborted: unknown;
        const result = await idempotency.execute(
          id,
          taken!,
          ({ signal }) =>
            new Promise<string>((resolve) => {
              const timer = setTimeout(() => resolve('done'), 1_000);
              signal.addEventListener('abort', () => {
                clearTimeout(timer);
                aborted = signal.reason;
                resolve('aborted');
              });
            }),
        );
        expect(aborted).toBeUndefined();
        expect(result).toMatchObject({ status: 'completed', result: 'done', recorded: true });
        expect(lost).toEqual([]);
        expect((await suite.store.get(id))?.state).toBe('COMPLETED');
      } finally {
        await set.releaseAll();
      }
    });
  },
);
