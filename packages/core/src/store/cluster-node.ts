import calculateSlot from 'cluster-key-slot';
import type { Cluster, Redis } from 'ioredis';
import type { RedisClient } from './redis-client';

/**
 * The connection a key's commands go to. That is the client itself when standalone, and in a Cluster the
 * client's connection to the master that serves the key's slot, from its slot map. A keyless command sent
 * there, such as `WAIT` or `TIME`, then concerns the same node as the key's writes, and for `WAIT` the same
 * connection. `undefined` when the slot map does not know the slot, while the cluster is being resharded.
 */
export function connectionForKey(redis: RedisClient, key: string): Redis | undefined {
  if (!redis.isCluster) return redis as Redis;
  const cluster = redis as Cluster;
  const owner = cluster.slots?.[calculateSlot(key)]?.[0];
  if (owner === undefined) return undefined;
  // ioredis's own lookup (what the Cluster client sends the key's commands through), when it has one: no
  // array of every master per call.
  const pool = (
    cluster as unknown as { connectionPool?: { getInstanceByKey?: (node: string) => Redis | undefined } }
  ).connectionPool;
  if (typeof pool?.getInstanceByKey === 'function') return pool.getInstanceByKey(owner);
  return cluster.nodes('master').find((node) => `${node.options.host}:${node.options.port}` === owner);
}

/**
 * The connections to every master. That is the client itself when standalone, and in a Cluster its
 * connections to the masters it knows, none before it loaded its slot map.
 */
export function masterConnections(redis: RedisClient): Redis[] {
  return redis.isCluster ? (redis as Cluster).nodes('master') : [redis as Redis];
}
