import {
  Idempotency,
  type RecordId,
  RedisIdempotencyStore,
  type RunResult,
  StoreUnavailableError,
} from '@idempotent-consumer/core';
import { Redis } from 'ioredis';
import { describeWithServices } from '../../support/service';
import { redisClock, uniquePrefix } from './redis-target';

/** The real store, whose heartbeats go unanswered (the fault injected: the handler's lease lapses). */
class UnansweredHeartbeats extends RedisIdempotencyStore {
  override async extend(): Promise<never> {
    throw new StoreUnavailableError('the heartbeat went unanswered');
  }
}

// The last attempt's lease lapses while its handler runs (no heartbeat reaches Redis), and another
// delivery's claim turns the record FAILED (lapsed) under the holder's own fencing token. The holder's
// own write after its handler is refused (LEASE_LOST): it must not be taken for a write an earlier,
// unanswered try of its own applied.
describeWithServices(['redis'], 'a write after the last attempt lapsed, on Redis', ({ redis: url }) => {
  let redis: Redis;
  beforeAll(() => {
    redis = new Redis(url);
  });
  afterAll(async () => {
    await redis.quit();
  });

  it("a holder's fail refused on the record a claim turned FAILED when its lease lapsed is lease-lost, not a recorded failure", async () => {
    const keyPrefix = uniquePrefix('lapsed-write');
    const store = new RedisIdempotencyStore({ redis }, { keyPrefix });
    const holder = new Idempotency(
      { store: new UnansweredHeartbeats({ redis }, { keyPrefix }), logger: false },
      { leaseMs: 300, maxAttempts: 1 },
    );
    const other = new Idempotency(
      { store, logger: false },
      { leaseMs: 300, maxAttempts: 1, conflictWaitMs: 0 },
    );
    const id: RecordId = { scope: 'payments', key: 'pay-1' };
    const events: string[] = [];
    holder.on('failed', (e) => events.push(`failed recorded=${e.recorded}`));
    holder.on('leaseLost', (e) => events.push(`leaseLost ${e.during}`));
    let otherClaim: RunResult<unknown> | undefined;

    const result = await holder.run(id, async ({ signal }) => {
      // No heartbeat answered for a whole lease: the holder is told its claim is lost.
      await new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }));
      const held = await store.get(id);
      await redisClock(redis).passTime(held!.leaseExpiresAtMs!);
      // A redelivery claims: the last attempt's lease lapsed, so the record is FAILED (lapsed).
      otherClaim = await other.run(id, () => 'never runs');
      throw new Error('the charge failed');
    });

    expect(otherClaim).toMatchObject({ outcome: 'FAILED' });
    const record = await store.get(id);
    expect(record).toMatchObject({
      state: 'FAILED',
      fencingToken: (result as { fencingToken: number }).fencingToken,
    });
    expect(record!.error).toContain('lost its lease'); // the claim's error: the holder's fail changed nothing
    // The fail was refused: reported as such, so an adapter does not dead-letter a second copy of a
    // message whose FAILED record the other delivery already dead-lettered.
    expect(result).toMatchObject({ status: 'lease-lost', handlerStarted: true, handlerCompleted: false });
    expect(events).toEqual(['leaseLost local-deadline', 'leaseLost write']);
  });
});
