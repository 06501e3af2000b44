import { Idempotency, RedisIdempotencyStore } from '@idempotent-consumer/core';
import type Redis from 'ioredis';
import { handler, LEASE_MS, RETENTION_MS } from './scenarios';

/** Bytes Redis uses for one record, from `MEMORY USAGE <key> SAMPLES 0`. */
export interface MemoryRow {
  readonly what: string;
  readonly bytes: number;
}

async function usage(redis: Redis, key: string): Promise<number> {
  const bytes = (await redis.call('MEMORY', 'USAGE', key, 'SAMPLES', '0')) as number | null;
  if (bytes === null) throw new Error(`MEMORY USAGE found no key ${key}`);
  return bytes;
}

/**
 * Memory of one record in each shape, with a realistic 36-character idempotency key (a UUID), against the
 * reference's string key holding the same result.
 */
export async function measureMemory(redis: Redis, prefix: string): Promise<MemoryRow[]> {
  const store = new RedisIdempotencyStore({ redis }, { keyPrefix: prefix });
  const idempotency = new Idempotency({ store }, { leaseMs: LEASE_MS, retentionMs: RETENTION_MS });
  const key = '2f1c7a52-8d7e-4f0b-9a51-6f7c2b9e4d11';
  const scope = 'orders-consumer/orders';
  await idempotency.run({ scope, key, payload: { order: 1 } }, handler);
  await idempotency.run({ scope, key: `${key}-none`, payload: { order: 2 } }, () => undefined);
  await store.claim({ scope, key: `${key}-busy` }, { leaseMs: LEASE_MS, retentionMs: RETENTION_MS });
  const refKey = `${prefix}:ref:${scope}:${key}`;
  await redis.set(refKey, JSON.stringify(handler()), 'PX', RETENTION_MS);
  return [
    { what: 'reference: string key holding the result', bytes: await usage(redis, refKey) },
    {
      what: 'record COMPLETED, fingerprint + result',
      bytes: await usage(redis, store.recordKey({ scope, key })),
    },
    {
      what: 'record COMPLETED, fingerprint, no result',
      bytes: await usage(redis, store.recordKey({ scope, key: `${key}-none` })),
    },
    {
      what: 'record IN_PROGRESS, no fingerprint',
      bytes: await usage(redis, store.recordKey({ scope, key: `${key}-busy` })),
    },
  ];
}
