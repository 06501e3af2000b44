import Redis from 'ioredis';

/** Where the bench's Redis is: `REDIS_URL`, else the local default. */
export const redisUrl = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';

/** An ioredis client that fails fast instead of retrying (a bench must not hang on a dead server). */
export async function connectRedis(enableAutoPipelining = false): Promise<Redis> {
  const redis = new Redis(redisUrl, {
    enableAutoPipelining,
    lazyConnect: true,
    connectTimeout: 2_000,
    maxRetriesPerRequest: 1,
    retryStrategy: () => null,
  });
  await redis.connect();
  await redis.ping();
  return redis;
}

/** Deletes every key under `prefix` (SCAN + UNLINK; never FLUSHDB on the shared server). */
export async function deleteByPrefix(redis: Redis, prefix: string): Promise<void> {
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 5_000);
    cursor = next;
    if (keys.length > 0) await redis.unlink(...keys);
  } while (cursor !== '0');
}
