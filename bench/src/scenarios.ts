import { Idempotency, RedisIdempotencyStore } from '@idempotent-consumer/core';
import type Redis from 'ioredis';

/** One way of processing message `i` exactly once; `setup` prepares whatever the scenario needs. */
export interface Scenario {
  readonly name: string;
  /** Processes message number `i` (a fresh idempotency key per `i` within one `round`). */
  process(i: number): Promise<unknown>;
}

/** Lease and retention used by every scenario, in milliseconds. */
export const LEASE_MS = 30_000;
export const RETENTION_MS = 600_000;

/** The handler every scenario runs: a trivial side-effect-free function, so only the overhead is measured. */
export const handler = (): { ok: boolean } => ({ ok: true });

/** No idempotency at all: the handler alone (the floor). */
export function bareHandler(): Scenario {
  return { name: 'bare handler (no idempotency)', process: async () => handler() };
}

/**
 * The reference: the minimal Redis dedup any consumer needs, two round trips per message:
 * `SET key 1 NX PX lease` (claim) and, after the handler, `SET key done PX retention` (complete).
 */
export function reference(redis: Redis, prefix: string, round: string): Scenario {
  return {
    name: 'reference: SET NX PX + SET PX',
    async process(i) {
      const key = `${prefix}:ref:${round}:${i}`;
      const claimed = await redis.set(key, '1', 'PX', LEASE_MS, 'NX');
      if (claimed !== 'OK') return undefined;
      const result = handler();
      await redis.set(key, JSON.stringify(result), 'PX', RETENTION_MS);
      return result;
    },
  };
}

/** `Idempotency.run`: claim (lua/claim.lua), handler with heartbeat, complete with the stored result. */
export function idempotencyRun(redis: Redis, prefix: string, round: string): Scenario {
  const store = new RedisIdempotencyStore({ redis }, { keyPrefix: prefix });
  const idempotency = new Idempotency({ store }, { leaseMs: LEASE_MS, retentionMs: RETENTION_MS });
  return {
    name: 'Idempotency.run (claim + complete)',
    process: (i) => idempotency.run({ scope: `run-${round}`, key: String(i) }, handler),
  };
}

/**
 * The store alone, without the runner: `claim` then `complete` (two EVALSHA round trips), to split the
 * overhead of `Idempotency.run` into the scripts' share and the runner's (heartbeat timers, events, codec).
 */
export function storeOnly(redis: Redis, prefix: string, round: string): Scenario {
  const store = new RedisIdempotencyStore({ redis }, { keyPrefix: prefix });
  return {
    name: 'store.claim + store.complete (no runner)',
    async process(i) {
      const id = { scope: `store-${round}`, key: String(i) };
      const claim = await store.claim(id, { leaseMs: LEASE_MS, retentionMs: RETENTION_MS });
      if (claim.outcome !== 'ACQUIRED') return undefined;
      const result = handler();
      return store.complete(id, claim.fencingToken, {
        retentionMs: RETENTION_MS,
        result: `j${JSON.stringify(result)}`,
      });
    },
  };
}

/** The duplicate path of the reference: a `SET NX` that finds the key (one round trip). */
export function referenceDuplicate(redis: Redis, prefix: string, round: string): Scenario {
  return {
    name: 'reference duplicate: SET NX (fails)',
    process: (i) => redis.set(`${prefix}:ref:${round}:${i}`, '1', 'PX', LEASE_MS, 'NX'),
  };
}

/** The duplicate path of `Idempotency.run`: one claim that returns DUPLICATE and the replayed result. */
export function idempotencyDuplicate(redis: Redis, prefix: string, round: string): Scenario {
  const store = new RedisIdempotencyStore({ redis }, { keyPrefix: prefix });
  const idempotency = new Idempotency({ store }, { leaseMs: LEASE_MS, retentionMs: RETENTION_MS });
  return {
    name: 'Idempotency.run, DUPLICATE (replay)',
    process: (i) => idempotency.run({ scope: `run-${round}`, key: String(i) }, handler),
  };
}
