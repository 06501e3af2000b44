import { once } from 'node:events';
import { performance } from 'node:perf_hooks';
import {
  type AcquiredReply,
  type ClaimReply,
  type ExtendReply,
  Idempotency,
  type IdempotencyStore,
  type RecordId,
  RedisIdempotencyStore,
  type WriteReply,
} from '@idempotent-consumer/core';
import { LeaseKeeperSet, StoreGate } from '@idempotent-consumer/core/kit';
import Redis from 'ioredis';
import { RedisServer } from '../../support/redis-server';
import { describeWithServices } from '../../support/service';
import { useRedisStore } from './redis-target';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, Math.max(0, ms)));

const LEASE_MS = 3_000;
const HEARTBEAT_MS = 1_000; // the runner's and the set's: heartbeatIntervalFor(3000) = 1000
const MESSAGES = 3;

/** Redis, with every `extend` sent through it counted, and the last one's send time and reply kept. */
function countingExtends(store: IdempotencyStore) {
  const counts = { extend: 0, answered: 0 };
  let answered: () => void = () => {};
  const proxy = new Proxy(store, {
    get(target, property, receiver) {
      if (property === 'extend') {
        return async (...args: Parameters<IdempotencyStore['extend']>): Promise<ExtendReply> => {
          counts.extend += 1;
          const reply = await target.extend(...args);
          counts.answered += 1;
          answered();
          return reply;
        };
      }
      const value = Reflect.get(target, property, receiver);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
  /** Resolves once `n` more extensions were answered. */
  const nextAnswers = (n: number) =>
    new Promise<void>((resolve) => {
      const until = counts.answered + n;
      answered = () => {
        if (counts.answered >= until) resolve();
      };
    });
  return { store: proxy, counts, nextAnswers };
}

// A batch whose messages wait longer than (leaseMs - one heartbeat interval) for their turn, while a
// LeaseKeeperSet keeps their counted claims alive in Redis. Before the fix `take` handed over only the
// claim's own reply, so `execute` counted the lease from the claim and sent one more `extend` per message
// before its handler, although the set had renewed the lease a moment before (measured: 1 per message).
describeWithServices(
  ['redis'],
  'LeaseKeeperSet on Redis: the lease it renewed is handed to execute',
  ({ redis }) => {
    const suite = useRedisStore(redis, 'lease-keeper-set');

    it('messages taken after the set extended their leases: no extend before their handlers', async () => {
      const counting = countingExtends(suite.store);
      const idempotency = new Idempotency(
        { store: counting.store, logger: false },
        { leaseMs: LEASE_MS, heartbeatIntervalMs: HEARTBEAT_MS, retentionMs: 60_000 },
      );
      const ids: RecordId[] = Array.from({ length: MESSAGES }, (_, i) => ({
        scope: 'set',
        key: `k${i}-${Date.now()}`,
      }));
      const replies = await idempotency.claimMany(ids, { reserve: false });
      // Every claim was requested before this: by now + (lease - interval) less than one interval of each
      // claim's own lease is left, so a lease counted from the claim is renewed before the handler.
      const claimedAt = performance.now();
      const set = new LeaseKeeperSet<number>(idempotency, {
        leaseMs: LEASE_MS,
        heartbeatIntervalMs: HEARTBEAT_MS,
      });
      replies.forEach((reply, i) => {
        if (reply?.outcome !== 'ACQUIRED') throw new Error(`got ${reply?.outcome}`);
        set.add(i, ids[i]!, reply);
      });
      set.start();
      try {
        await sleep(claimedAt + LEASE_MS - HEARTBEAT_MS - performance.now());
        // The set's next round of extensions, answered: the leases were renewed just now.
        await counting.nextAnswers(MESSAGES);
        const extraExtends: number[] = [];
        for (const [i, id] of ids.entries()) {
          const taken = await set.take(i);
          expect(taken?.renewedLease).toBeDefined();
          const before = counting.counts.extend;
          const result = await idempotency.execute(
            id,
            taken!.claim,
            () => {
              extraExtends.push(counting.counts.extend - before);
              return 'done';
            },
            { renewedLease: taken!.renewedLease },
          );
          expect(result).toMatchObject({ status: 'completed', recorded: true });
        }
        expect(extraExtends).toEqual(Array(MESSAGES).fill(0));
      } finally {
        await set.releaseAll();
      }
    });
  },
);

function acquired(reply: ClaimReply | undefined): AcquiredReply {
  if (reply?.outcome !== 'ACQUIRED') throw new Error(`got ${reply?.outcome}`);
  return reply;
}

// A batch stopped (releaseAll) while Redis does not answer: before the fix the set tried each release once,
// and the claims stayed IN_PROGRESS until their leases lapsed (a CONFLICT for the redelivery meanwhile;
// afterwards a counted claim's attempt spent on a handler that never ran, and the next claim
// ACQUIRED_STALE). The set now gives them back like the adapters' giveBackUnrun: again once the store
// answers (its gate opens).
describeWithServices(
  ['redis'],
  'LeaseKeeperSet on a private redis-server: releaseAll during an outage',
  () => {
    let server: RedisServer;
    let client: Redis;
    beforeAll(async () => {
      // Every write on disk before it is answered: the records outlive the SIGKILL of the outage.
      server = await RedisServer.start({ args: ['--appendonly', 'yes', '--appendfsync', 'always'] });
      client = new Redis(server.url, {
        maxRetriesPerRequest: 0,
        enableOfflineQueue: false,
        retryStrategy: () => 50,
      });
      await once(client, 'ready');
    });
    afterAll(async () => {
      client.disconnect();
      await server.dispose();
    });

    it('gives the unrun claims back once Redis answers again: RELEASED, attempt 0, the next claim ACQUIRED', async () => {
      const redisStore = new RedisIdempotencyStore(
        { redis: client },
        { keyPrefix: 'set-outage', commandTimeoutMs: 300 },
      );
      let releasesAnswered = 0;
      let onReleaseAnswered: () => void = () => {};
      const store = new Proxy(redisStore, {
        get(target, property, receiver) {
          if (property === 'release') {
            return async (...args: Parameters<IdempotencyStore['release']>): Promise<WriteReply> => {
              const reply = await target.release(...args);
              releasesAnswered += 1;
              onReleaseAnswered();
              return reply;
            };
          }
          const value = Reflect.get(target, property, receiver);
          return typeof value === 'function' ? value.bind(target) : value;
        },
      });
      // A lease far longer than the test: a claim not given back is still IN_PROGRESS at its end.
      const idempotency = new Idempotency({ store, logger: false }, { leaseMs: 60_000, retentionMs: 60_000 });
      const gate = new StoreGate(store, { storeProbeBackoff: { baseMs: 50, maxMs: 200, jitter: 'none' } });
      const stopping = new AbortController();
      const reserved: RecordId = { scope: 'set-outage', key: `reserved-${Date.now()}` };
      const counted: RecordId = { scope: 'set-outage', key: `counted-${Date.now()}` };
      const [reservation] = await idempotency.claimMany([reserved]);
      const claim = await idempotency.claim(counted);
      const errors: string[] = [];
      const set = new LeaseKeeperSet<number>(
        idempotency,
        { leaseMs: 60_000, heartbeatIntervalMs: 20_000 },
        { onStoreError: ({ operation, id }) => errors.push(`${operation} ${id.key}`) },
        { gate, signal: stopping.signal },
      );
      set.add(0, reserved, acquired(reservation));
      set.add(1, counted, acquired(claim));
      set.start();
      try {
        await server.stop();
        await set.releaseAll(); // the first tries, unanswered
        expect(errors.sort()).toEqual([`release ${counted.key}`, `release ${reserved.key}`]);
        expect(releasesAnswered).toBe(0);
        const bothAnswered = new Promise<void>((resolve) => {
          onReleaseAnswered = () => {
            if (releasesAnswered >= 2) resolve();
          };
        });
        await server.restart();
        // The give-backs follow the gate's opening by one round trip; bounded (before the fix none came).
        await Promise.race([bothAnswered, sleep(10_000)]);
        expect(await store.get(reserved)).toMatchObject({ state: 'RELEASED', attempt: 0, abandoned: false });
        expect(await store.get(counted)).toMatchObject({ state: 'RELEASED', attempt: 0, abandoned: false });
        expect(await idempotency.claim(reserved)).toMatchObject({ outcome: 'ACQUIRED', attempt: 1 });
        expect(await idempotency.claim(counted)).toMatchObject({ outcome: 'ACQUIRED', attempt: 1 });
      } finally {
        stopping.abort();
        gate.dispose();
        await server.restart();
      }
    });
  },
);
