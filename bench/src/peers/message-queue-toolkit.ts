import type Redis from 'ioredis';
import { BUSY, type Contender } from '../contender';

/** The part of `@message-queue-toolkit/redis-message-deduplication-store` (ESM-only) the bench uses. */
interface DeduplicationStore {
  acquireLock(
    key: string,
    options: { acquireTimeoutSeconds: number; lockTimeoutSeconds: number; refreshIntervalSeconds: number },
  ): Promise<{ result?: { release(): Promise<void> }; error?: Error }>;
  setIfNotExists(key: string, value: string, ttlSeconds: number): Promise<boolean>;
  keyExists(key: string): Promise<boolean>;
}

/** message-queue-toolkit's defaults (`DEFAULT_MESSAGE_DEDUPLICATION_OPTIONS`). */
export const MQT_DEFAULTS = {
  deduplicationWindowSeconds: 40,
  lockTimeoutSeconds: 20,
  acquireTimeoutSeconds: 20,
  refreshIntervalSeconds: 10,
};

/**
 * message-queue-toolkit's Redis deduplication store (`RedisMessageDeduplicationStore` on ioredis), driven
 * the way its consumers drive it (`AbstractQueueService`: `isMessageDuplicated`, `acquireLockForMessage`,
 * `deduplicateMessage`): EXISTS the key; take a redis-semaphore mutex (`SET NX PX`, refreshed on a
 * timer); EXISTS again (another consumer may have finished meanwhile); run the handler; `SET NX EX` the key;
 * release the mutex (a Lua compare-and-delete). Five round trips; it stores no result, so a duplicate is
 * skipped with nothing to replay (`undefined`).
 */
export async function messageQueueToolkit(
  redis: Redis,
  prefix: string,
  options: Partial<typeof MQT_DEFAULTS> = {},
): Promise<Contender> {
  // A real ES-module import: the package is ESM-only and this file compiles to CommonJS.
  const { RedisMessageDeduplicationStore } = (await import(
    '@message-queue-toolkit/redis-message-deduplication-store'
  )) as { RedisMessageDeduplicationStore: new (d: { redis: Redis }) => DeduplicationStore };
  const store = new RedisMessageDeduplicationStore({ redis });
  const o = { ...MQT_DEFAULTS, ...options };
  return {
    name: 'message-queue-toolkit RedisMessageDeduplicationStore',
    async process(key, handler) {
      const id = `${prefix}:consumer:${key}`;
      if (await store.keyExists(id)) return undefined;
      const lock = await store.acquireLock(id, o);
      if (lock.error) {
        if (
          lock.error.name === 'AcquireLockTimeoutError' ||
          lock.error.constructor.name === 'AcquireLockTimeoutError'
        )
          return BUSY;
        throw lock.error;
      }
      try {
        if (await store.keyExists(id)) return undefined;
        const result = await handler();
        await store.setIfNotExists(id, new Date().toISOString(), o.deduplicationWindowSeconds);
        return result;
      } finally {
        await lock.result!.release();
      }
    },
    async close() {},
  };
}
