import type { Cluster, Redis } from 'ioredis';

/** What the Redis store uses: an ioredis standalone `Redis` or a `Cluster` client. */
export type RedisClient = Redis | Cluster;
