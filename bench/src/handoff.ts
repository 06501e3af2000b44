import { performance } from 'node:perf_hooks';
import { Idempotency, RedisIdempotencyStore } from '@idempotent-consumer/core';
import type Redis from 'ioredis';
import { LEASE_MS, RETENTION_MS } from './contender';
import { type LatencyStats, latencyOf } from './measure';

/** How long a duplicate that waits for the holder (`conflictWaitMs`) takes to settle once the holder is done. */
export interface HandoffRow {
  readonly notifications: boolean;
  /** From the holder's handler returning (its complete is sent next) to the waiting duplicate's settle, µs. */
  readonly stats: LatencyStats;
}

/**
 * `samples` times: a holder runs a key and its handler waits; a duplicate calls `run` with
 * `conflictWaitMs` and gets CONFLICT, then waits for the holder's outcome; the holder's handler returns; we
 * time from that return to the duplicate's DUPLICATE. With outcome notifications (sharded Pub/Sub) and
 * without (polling only).
 */
export async function measureHandoff(
  redis: Redis,
  prefix: string,
  samples: number,
  notifications: boolean,
): Promise<HandoffRow> {
  const store = new RedisIdempotencyStore(
    { redis },
    { keyPrefix: `${prefix}:handoff-${notifications}`, outcomeNotifications: notifications },
  );
  const holder = new Idempotency({ store }, { leaseMs: LEASE_MS, retentionMs: RETENTION_MS });
  const waiter = new Idempotency({ store }, { leaseMs: LEASE_MS, retentionMs: RETENTION_MS });
  const times = new Float64Array(samples);
  for (let i = 0; i < samples; i++) {
    const request = { scope: 'handoff', key: String(i) };
    let release!: () => void;
    const gate = new Promise<void>((r) => {
      release = r;
    });
    let started!: () => void;
    const running = new Promise<void>((r) => {
      started = r;
    });
    let returnedAt = 0;
    const held = holder.run(request, async () => {
      started();
      await gate;
      returnedAt = performance.now();
      return { ok: true };
    });
    await running;
    const conflicted = new Promise<void>((resolve) => {
      const onOutcome = (event: { key: string; outcome: string }) => {
        if (event.key === request.key && event.outcome === 'CONFLICT') {
          waiter.off('outcome', onOutcome);
          resolve();
        }
      };
      waiter.on('outcome', onOutcome);
    });
    const duplicate = waiter
      .run(request, async () => 'ran twice', { conflictWaitMs: 10_000 })
      .then((r) => {
        times[i] = (performance.now() - returnedAt) * 1000;
        return r;
      });
    await conflicted;
    release();
    const [, r] = await Promise.all([held, duplicate]);
    if (r.outcome !== 'DUPLICATE') throw new Error(`the waiting duplicate ended ${r.outcome}`);
  }
  return { notifications, stats: latencyOf(times) };
}
