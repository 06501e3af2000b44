import calculateSlot from 'cluster-key-slot';
import type { Cluster, Redis } from 'ioredis';
import type { RedisClient } from './redis-client';

/**
 * The connection a key's commands go to: the client itself when standalone; in a Cluster, the client's
 * connection to the master that serves the key's slot (from its slot map), so that a keyless command sent
 * there (`WAIT`, `TIME`) concerns the same node, and for `WAIT` the same connection, as the key's writes.
 * `undefined` when the slot map does not know the slot (the cluster is being resharded).
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
 * The connections to every master: the client itself when standalone; in a Cluster, its connections to
 * the masters it knows (none before it loaded its slot map).
 */
export function masterConnections(redis: RedisClient): Redis[] {
  return redis.isCluster ? (redis as Cluster).nodes('master') : [redis as Redis];
}
