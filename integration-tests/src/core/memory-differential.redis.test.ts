import {
  type IdempotencyStore,
  MemoryIdempotencyStore,
  type RecordId,
  type RedisIdempotencyStore,
} from '@idempotent-consumer/core';
import { describeWithServices } from '../../support/service';
import { useRedisStore } from './redis-target';

// The memory store against the Lua scripts, step by step: seeded random sequences of every store operation
// on two keys (claims counted and reserved, with and without fingerprints and maxAttempts, fenced writes
// with current, old and unknown tokens, leases lapsing), each answered by both stores; every reply and the
// record after it must agree. Tokens differ between the stores (clocks), so they are compared as "the
// token of the n-th claim". The contract rows (store-contract.ts) check each transition on its own; this
// checks the paths between them.
//
// The sequences run five at a time (`it.concurrent`, Jest's maxConcurrency): each waits on about 12,000
// Redis round trips one after another (76 s in one run on a loaded machine, one at a time), and each works
// on a scope of its own (`differential-<seed>`, its own keys, its own memory store and clock), so no
// sequence sees another's records, and a failure names its sequence as before.

const LEASE_MS = 60_000;
const RETENTION_MS = 86_400_000;
const FINGERPRINTS = ['', 'a'.repeat(64), 'b'.repeat(64)];
const OPERATIONS = [
  'claim',
  'claim',
  'reserve',
  'reserve',
  'complete',
  'release',
  'release-abandoned',
  'release-never-started',
  'release-unrun-stale',
  'fail',
  'fail-abandoned',
  'extend',
  'start',
  'mark-dead-lettered',
  'lapse',
] as const;

/** A small seeded generator (a linear congruential one), so a failing sequence can be run again. */
function random(seed: number): <T>(items: readonly T[]) => T {
  let state = seed;
  return (items) => {
    state = (state * 1_103_515_245 + 12_345) % 2 ** 31;
    return items[Math.floor((state / 2 ** 31) * items.length)]!;
  };
}

/** A store's reply or record with its times dropped and its tokens named by the claim that issued them. */
function normalized(value: unknown, tokens: readonly number[]): unknown {
  if (value === null || typeof value !== 'object') return value;
  const out: Record<string, unknown> = {};
  for (const [field, v] of Object.entries(value)) {
    if (field === 'fencingToken' || field === 'currentFencingToken') {
      out[field] = v === 0 ? 'none' : `claim ${tokens.indexOf(v as number)}`;
    } else if (/At(Ms)?$|Ms$/.test(field)) {
      out[field] = v === undefined ? 'none' : 'set';
    } else out[field] = v;
  }
  return out;
}

describeWithServices(['redis'], 'the memory store answers as the Lua scripts do', ({ redis: url }) => {
  const suite = useRedisStore(url, 'differential');

  it.concurrent.each(Array.from({ length: 100 }, (_, i) => i + 1))(
    'sequence %i: 40 random operations on one or two keys, every reply and record alike',
    async (seed) => {
      const redis: RedisIdempotencyStore = suite.store;
      let clockMs = Date.now();
      const memory = new MemoryIdempotencyStore({ now: () => clockMs });
      const pick = random(seed);
      const tokens = { memory: [] as number[], redis: [] as number[] };
      const steps: string[] = [];
      for (let step = 0; step < 40; step++) {
        // One key in even sequences (longer histories per key), two in odd ones.
        const id: RecordId = {
          scope: `differential-${seed}`,
          key: pick(seed % 2 === 0 ? ['a'] : ['a', 'b']),
        };
        const operation = pick(OPERATIONS);
        if (operation === 'lapse') {
          // Every lease ends: the memory store's clock passes it, the records' expiry is set in the past.
          clockMs += 2 * LEASE_MS;
          for (const key of ['a', 'b']) {
            const recordKey = redis.recordKey({ scope: id.scope, key });
            if ((await suite.redis.hget(recordKey, 's')) === 'P') await suite.redis.hset(recordKey, 'e', '1');
          }
          steps.push('every lease lapses');
          continue;
        }
        clockMs += 1;
        // Mostly the latest claim's token (its holder writes), else an older one or one no claim issued (-1).
        const latest = tokens.memory.length - 1;
        const claim = pick([latest, latest, latest, ...tokens.memory.keys(), -1]);
        const maxAttempts = pick([0, 1, 2, 3]);
        const fingerprint = pick(FINGERPRINTS);
        const result = pick([undefined, 'j1', 'j""']);
        const call = (store: IdempotencyStore, issued: number[]) => {
          const token = claim < 0 ? 12_345 : issued[claim]!;
          const claimOptions = { leaseMs: LEASE_MS, retentionMs: RETENTION_MS, fingerprint, maxAttempts };
          const lease = { leaseMs: LEASE_MS, retentionMs: RETENTION_MS };
          switch (operation) {
            case 'claim':
              return store.claim(id, claimOptions);
            case 'reserve':
              return store.claim(id, { ...claimOptions, reserve: true });
            case 'complete':
              return store.complete(id, token, { retentionMs: RETENTION_MS, result });
            case 'release':
              return store.release(id, token, { retentionMs: RETENTION_MS });
            case 'release-abandoned':
              return store.release(id, token, { retentionMs: RETENTION_MS, abandoned: true });
            case 'release-never-started':
              return store.release(id, token, { retentionMs: RETENTION_MS, neverStarted: true });
            case 'release-unrun-stale':
              // The give-back of a stale claim nobody ran (unrunReleaseOptions: a failed claimMany, a claim
              // written by a call that failed).
              return store.release(id, token, {
                retentionMs: RETENTION_MS,
                abandoned: true,
                neverStarted: true,
              });
            case 'fail':
              return store.fail(id, token, { retentionMs: RETENTION_MS, error: 'E' });
            case 'fail-abandoned':
              return store.fail(id, token, { retentionMs: RETENTION_MS, error: 'E', abandoned: true });
            case 'extend':
              return store.extend(id, token, lease);
            case 'start':
              return store.start(id, token, lease);
            case 'mark-dead-lettered':
              return store.markDeadLettered(id, token);
          }
        };
        const replies = { memory: await call(memory, tokens.memory), redis: await call(redis, tokens.redis) };
        for (const [store, reply] of Object.entries(replies) as [keyof typeof tokens, unknown][]) {
          const outcome = (reply as { outcome?: string }).outcome;
          if (outcome === 'ACQUIRED' || outcome === 'ACQUIRED_STALE') {
            tokens[store].push((reply as { fencingToken: number }).fencingToken);
          }
        }
        steps.push(
          `${operation} ${id.key} (claim ${claim}, maxAttempts ${maxAttempts}, fingerprint ${FINGERPRINTS.indexOf(fingerprint)}, result ${result}): ${JSON.stringify(normalized(replies.memory, tokens.memory))}`,
        );
        const seen = {
          memory: [
            normalized(replies.memory, tokens.memory),
            normalized(await memory.get(id), tokens.memory),
          ],
          redis: [normalized(replies.redis, tokens.redis), normalized(await redis.get(id), tokens.redis)],
        };
        if (JSON.stringify(seen.memory) !== JSON.stringify(seen.redis)) {
          expect({ steps, ...seen }).toEqual({ steps, memory: seen.redis, redis: seen.redis });
        }
      }
    },
  );
});
