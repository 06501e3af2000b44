import {
  type ClaimOptions,
  type HandlerContext,
  Idempotency,
  type RecordId,
  RedisIdempotencyAdmin,
} from '@idempotent-consumer/core';
import { describeWithServices } from '../../support/service';
import { useRedisStore } from './redis-target';

// Edge cases of the Lua scripts: an operator's release of a FAILED record whose last
// handler recorded no outcome (its lease lapsed, or the runner gave up on it by handlerTimeoutMs), and the
// largest leases and retentions the options accept.

const RETENTION_MS = 600_000;

describeWithServices(['redis'], 'the Lua scripts at their edges', ({ redis: url }) => {
  const suite = useRedisStore(url, 'lua-edges');

  /** Claims `id` with a 1 ms lease until a claim is not CONFLICT (the previous lease lapsed). */
  async function claimPastLease(id: RecordId, options: ClaimOptions) {
    let reply = await suite.store.claim(id, options);
    while (reply.outcome === 'CONFLICT') reply = await suite.store.claim(id, options);
    return reply;
  }

  it('admin release of a FAILED record whose last handler lost its lease (lapsed): the next claim is ACQUIRED_STALE', async () => {
    const admin = new RedisIdempotencyAdmin({ redis: suite.redis }, { keyPrefix: suite.prefix });
    const id = { scope: 'admin-lapsed', key: 'k' };
    const lapsing = { leaseMs: 1, retentionMs: RETENTION_MS, maxAttempts: 1 };
    expect(await suite.store.claim(id, lapsing)).toMatchObject({ outcome: 'ACQUIRED' });
    // The handler of that claim may still run: its lease lapsed, and the next claim exhausts maxAttempts.
    expect(await claimPastLease(id, lapsing)).toMatchObject({ outcome: 'FAILED' });
    expect(await suite.store.get(id)).toMatchObject({ state: 'FAILED', lapsed: true });
    expect(await admin.release(id, { retentionMs: RETENTION_MS, expectedState: 'FAILED' })).toMatchObject({
      outcome: 'OK',
    });
    expect(await suite.store.claim(id, { leaseMs: 60_000, retentionMs: RETENTION_MS })).toMatchObject({
      outcome: 'ACQUIRED_STALE',
      attempt: 1,
    });
  });

  it('admin release of a FAILED record exhausted after an abandoned handler: the next claim is ACQUIRED_STALE', async () => {
    const admin = new RedisIdempotencyAdmin({ redis: suite.redis }, { keyPrefix: suite.prefix });
    const id = { scope: 'admin-abandoned', key: 'k' };
    const options = { leaseMs: 60_000, retentionMs: RETENTION_MS, maxAttempts: 1 };
    const first = await suite.store.claim(id, options);
    // Its handler timed out and may still run (handlerTimeoutMs): released abandoned.
    await suite.store.release(id, first.fencingToken, { retentionMs: RETENTION_MS, abandoned: true });
    expect(await suite.store.claim(id, options)).toMatchObject({
      outcome: 'FAILED',
      error: expect.stringContaining('recorded no outcome'),
    });
    await admin.release(id, { retentionMs: RETENTION_MS, expectedState: 'FAILED' });
    expect(await suite.store.claim(id, options)).toMatchObject({ outcome: 'ACQUIRED_STALE', attempt: 1 });
  });

  it('admin release of a FAILED record whose last handler the runner gave up on (handlerTimeoutMs): the next run is ACQUIRED_STALE', async () => {
    const admin = new RedisIdempotencyAdmin({ redis: suite.redis }, { keyPrefix: suite.prefix });
    const idempotency = new Idempotency(
      { store: suite.store, logger: false },
      { leaseMs: 60_000, retentionMs: RETENTION_MS, handlerTimeoutMs: 50, maxAttempts: 2 },
    );
    const id = { scope: 'admin-timed-out', key: 'k' };
    // Handlers that ignore their signal and outlive the bound: still running until the test lets them go.
    const running: (() => void)[] = [];
    const hang = () => new Promise<void>((resolve) => running.push(resolve));
    const seen: string[] = [];
    try {
      expect(await idempotency.run(id, hang)).toMatchObject({ status: 'released', attempt: 1 });
      // The last attempt: the runner gives up on it and records FAILED, while the handler may still run.
      const last = await idempotency.run(id, (context: HandlerContext) => {
        seen.push(context.outcome);
        return hang();
      });
      expect(last).toMatchObject({ status: 'failed', reason: 'attempts-exhausted', attempt: 2 });
      expect(await suite.store.get(id)).toMatchObject({ state: 'FAILED', abandoned: true });
      expect(await admin.release(id, { retentionMs: RETENTION_MS, expectedState: 'FAILED' })).toMatchObject({
        outcome: 'OK',
      });
      const next = await idempotency.run(id, (context: HandlerContext) => {
        seen.push(context.outcome);
        return 'done';
      });
      expect(next).toMatchObject({ outcome: 'ACQUIRED_STALE', status: 'completed', attempt: 1 });
      expect(seen).toEqual(['ACQUIRED_STALE', 'ACQUIRED_STALE']);
    } finally {
      for (const finish of running) finish();
    }
  });

  it('the longest lease and retention the options accept: claim, extend and complete work', async () => {
    const id = { scope: 'longest', key: 'k' };
    const options = { leaseMs: 2 ** 52, retentionMs: Number.MAX_SAFE_INTEGER };
    const claimed = await suite.store.claim(id, options);
    expect(claimed).toMatchObject({ outcome: 'ACQUIRED' });
    expect(await suite.store.extend(id, claimed.fencingToken, options)).toMatchObject({ ok: true });
    expect(
      await suite.store.complete(id, claimed.fencingToken, {
        retentionMs: Number.MAX_SAFE_INTEGER,
        result: 'r',
      }),
    ).toMatchObject({ ok: true });
    expect(await suite.store.claim(id, options)).toMatchObject({ outcome: 'DUPLICATE', result: 'r' });
  });
});
