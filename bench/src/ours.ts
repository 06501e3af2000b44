import {
  Idempotency,
  type IdempotencyOptions,
  type IdempotencyStore,
  RedisIdempotencyStore,
  type RedisIdempotencyStoreOptions,
} from '@idempotent-consumer/core';
import type Redis from 'ioredis';
import { BUSY, type Contender, LEASE_MS, RETENTION_MS } from './contender';

/** `Idempotency.run` on a `RedisIdempotencyStore`, as an application uses it. */
export class Ours implements Contender {
  readonly idempotency: Idempotency;

  constructor(
    readonly name: string,
    store: IdempotencyStore,
    private readonly scope = 'bench',
    options: IdempotencyOptions = {},
  ) {
    this.idempotency = new Idempotency(
      { store },
      { leaseMs: LEASE_MS, retentionMs: RETENTION_MS, ...options },
    );
  }

  async process(key: string, handler: () => Promise<unknown>): Promise<unknown> {
    const r = await this.idempotency.run({ scope: this.scope, key }, handler);
    if (r.outcome === 'DUPLICATE') return r.result;
    if (r.outcome === 'CONFLICT') return BUSY;
    if (r.outcome === 'ACQUIRED' || r.outcome === 'ACQUIRED_STALE') {
      if (r.status === 'completed' || r.status === 'lease-lost') return r.result;
    }
    throw new Error(`Idempotency.run ended ${r.outcome}/${'status' in r ? r.status : ''}`);
  }

  async close(): Promise<void> {}
}

/** {@link Ours} on a fresh store over `redis` with `keyPrefix` (and `storeOptions`). */
export function ours(
  redis: Redis,
  prefix: string,
  name = 'idempotent-consumer: Idempotency.run',
  storeOptions: RedisIdempotencyStoreOptions = {},
): Ours {
  return new Ours(name, new RedisIdempotencyStore({ redis }, { keyPrefix: prefix, ...storeOptions }));
}
