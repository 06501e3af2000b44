import { Idempotency, RedisIdempotencyStore } from '@idempotent-consumer/core';
import type Redis from 'ioredis';
import { LEASE_MS, RETENTION_MS } from './contender';
import { sequential } from './measure';

/** `claimMany` of one batch size: socket writes per call (round trips to the one node) and keys/s. */
export interface ClaimManyRow {
  readonly batch: number;
  readonly calls: number;
  readonly writesPerCall: number;
  readonly keysPerSecond: number;
  readonly p50Us: number;
}

/**
 * Counts the writes on `redis`'s socket: a pipeline is flushed in one write, so writes per call is the
 * number of round trips a call makes to the node.
 */
function countWrites(redis: Redis): { readonly count: number; restore(): void } {
  const stream = (redis as unknown as { stream: { write: (...a: unknown[]) => boolean } }).stream;
  const write = stream.write;
  const counter = {
    count: 0,
    restore: () => {
      stream.write = write;
    },
  };
  stream.write = (...args: unknown[]) => {
    counter.count++;
    return write.apply(stream, args);
  };
  return counter;
}

/** `Idempotency.claimMany` of `batch` new keys, `calls` times one after another. */
export async function measureClaimMany(
  redis: Redis,
  prefix: string,
  batch: number,
  calls: number,
): Promise<ClaimManyRow> {
  const store = new RedisIdempotencyStore({ redis }, { keyPrefix: prefix });
  const idempotency = new Idempotency({ store }, { leaseMs: LEASE_MS, retentionMs: RETENTION_MS });
  await idempotency.claimMany([{ scope: 'warm', key: `${batch}` }]); // loads the script (EVAL once)
  const writes = countWrites(redis);
  try {
    const stats = await sequential(calls, async (c) => {
      const replies = await idempotency.claimMany(
        Array.from({ length: batch }, (_, i) => ({ scope: `many-${batch}`, key: `${c}-${i}` })),
      );
      if (replies.some((r) => r.outcome !== 'ACQUIRED'))
        throw new Error('claimMany: a new key was not ACQUIRED');
    });
    return {
      batch,
      calls,
      writesPerCall: writes.count / calls,
      keysPerSecond: (batch * calls) / (stats.meanUs * calls * 1e-6),
      p50Us: stats.p50Us,
    };
  } finally {
    writes.restore();
  }
}
