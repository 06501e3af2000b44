import { RedisIdempotencyStore } from '@idempotent-consumer/core';
import { type Cluster, Redis, type RedisOptions } from 'ioredis';
import type { ContractClock, ContractTarget } from '../../../packages/core/test/contract/store-contract';

/** Reads the Redis server clock (`TIME`) in ms since the epoch: the clock every lease is measured on. */
export async function serverTimeMs(redis: Redis | Cluster): Promise<number> {
  const [seconds, micros] = (await redis.time()) as unknown as [string, string];
  return Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
}

/**
 * The Redis server clock for the store contract. `passTime` polls `TIME` (every 5 ms) until the server's
 * clock is past the instant, so lease expiry is measured where the scripts measure it. On a Cluster every
 * node has its own clock; all of them run on this machine, so any node's clock serves.
 */
export function redisClock(redis: Redis | Cluster): ContractClock {
  return {
    now: () => serverTimeMs(redis),
    passTime: async (atMs) => {
      const deadline = Date.now() + 10_000;
      while ((await serverTimeMs(redis)) <= atMs) {
        if (Date.now() > deadline) throw new Error(`the Redis clock did not pass ${atMs} within 10 s`);
        await new Promise((r) => setTimeout(r, 5));
      }
    },
  };
}

/** A unique key prefix per suite run, so runs on a shared Redis never meet. */
export function uniquePrefix(what: string): string {
  return `ic-test:${what}:${process.pid}:${Date.now().toString(36)}:${Math.random().toString(36).slice(2, 8)}`;
}

/**
 * A contract target on a Redis client (standalone or Cluster). A record is lost with `DEL`, or with
 * `PEXPIRE key 1` and a wait until Redis has expired it (what a retention shorter than a stall does).
 */
export function redisContractTarget(redis: Redis | Cluster, prefix: string): ContractTarget {
  const store = new RedisIdempotencyStore({ redis }, { keyPrefix: prefix });
  return {
    store,
    clock: redisClock(redis),
    close: () => store.close(),
    loseRecord: async (id, how) => {
      const key = store.recordKey(id);
      if (how === 'del') {
        await redis.del(key);
        return;
      }
      await redis.pexpire(key, 1);
      const deadline = Date.now() + 10_000;
      while ((await redis.exists(key)) === 1) {
        if (Date.now() > deadline) throw new Error(`${key} outlived PEXPIRE 1 by 10 s`);
        await new Promise((r) => setTimeout(r, 2));
      }
    },
  };
}

/** Deletes every key under `prefix` (SCAN + UNLINK), so suites leave the shared Redis as they found it. */
export async function deleteByPrefix(redis: Redis, prefix: string): Promise<void> {
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 1000);
    cursor = next;
    if (keys.length > 0) await redis.unlink(...keys);
  } while (cursor !== '0');
}

/** A suite's Redis client and store: see {@link useRedisStore}. */
export interface SuiteStore {
  /** A client of the suite's Redis (connected before the suite's tests, quit after them). */
  readonly redis: Redis;
  /** A store on {@link SuiteStore.redis} under {@link SuiteStore.prefix}. */
  readonly store: RedisIdempotencyStore;
  /** The suite's unique key prefix ({@link uniquePrefix}); every key under it is deleted after the suite. */
  readonly prefix: string;
}

/**
 * Registers the hooks that give a suite a Redis client on `url` (with `options`) and a
 * {@link RedisIdempotencyStore} under a unique prefix named after `what`; after the suite, every key that
 * starts with the prefix is deleted and the client quits. Call it in a `describe` body.
 */
export function useRedisStore(url: string, what: string, options: RedisOptions = {}): SuiteStore {
  const prefix = uniquePrefix(what);
  let redis: Redis | undefined;
  let store: RedisIdempotencyStore | undefined;
  beforeAll(() => {
    redis = new Redis(url, options);
    store = new RedisIdempotencyStore({ redis }, { keyPrefix: prefix });
  });
  afterAll(async () => {
    if (redis === undefined) return;
    await deleteByPrefix(redis, prefix);
    await redis.quit();
  });
  return {
    prefix,
    get redis() {
      if (redis === undefined) throw new Error('useRedisStore: the suite has not started');
      return redis;
    },
    get store() {
      if (store === undefined) throw new Error('useRedisStore: the suite has not started');
      return store;
    },
  };
}
