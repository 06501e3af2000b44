import type { AcquiredReply } from '../src';
import { Idempotency, MemoryIdempotencyStore } from '../src';
import { recordEvents } from './support/faulty-store';

/** A runner on the in-memory store with a fake clock (`clock.ms`), maxAttempts 2. */
function setup() {
  const clock = { ms: 1_700_000_000_000 };
  const store = new MemoryIdempotencyStore({ now: () => clock.ms });
  const idempotency = new Idempotency({ store }, { leaseMs: 10_000, retentionMs: 60_000, maxAttempts: 2 });
  return { clock, store, idempotency, events: recordEvents(idempotency) };
}

const batch = ['m1', 'm2', 'm3'].map((key) => ({ scope: 'topic/0', key }));
const acquired = (r: unknown) => r as AcquiredReply;

describe('reservations: an attempt counts only when a handler starts', () => {
  it('claimMany reserves; execute counts the attempt when it starts the handler', async () => {
    const { idempotency, store } = setup();
    const replies = await idempotency.claimMany(batch);
    expect(replies.map((r) => [r.outcome, acquired(r).started, r.attempt])).toEqual([
      ['ACQUIRED', false, 1],
      ['ACQUIRED', false, 1],
      ['ACQUIRED', false, 1],
    ]);
    expect(await store.get(batch[0]!)).toMatchObject({ attempt: 0, reserved: true });
    const seen: number[] = [];
    const result = await idempotency.execute(batch[0]!, acquired(replies[0]), (ctx) =>
      seen.push(ctx.attempt),
    );
    expect(result).toMatchObject({ status: 'completed', attempt: 1 });
    expect(seen).toEqual([1]);
    expect(await store.get(batch[0]!)).toMatchObject({ state: 'COMPLETED', attempt: 1, reserved: false });
  });

  it('interrupted batches give their unrun reservations back as often as they like: no attempt spent', async () => {
    const { idempotency, store } = setup();
    for (let i = 0; i < 5; i++) {
      const replies = await idempotency.claimMany(batch);
      for (const [j, r] of replies.entries())
        expect(await idempotency.release(batch[j]!, acquired(r))).toBe(true);
    }
    expect(await store.get(batch[1]!)).toMatchObject({ state: 'RELEASED', attempt: 0 });
    const [r] = await idempotency.claimMany([batch[1]!]);
    const result = await idempotency.execute(batch[1]!, acquired(r), () => 'ran');
    expect(result).toMatchObject({ status: 'completed', attempt: 1, recorded: true });
  });

  it('release of a counted claim whose handler never ran gives its attempt back (maxAttempts counts runs)', async () => {
    const { idempotency, store } = setup();
    for (let i = 0; i < 5; i++) {
      const [r] = await idempotency.claimMany([batch[0]!], { reserve: false });
      expect(r).toMatchObject({ outcome: 'ACQUIRED', started: true, attempt: 1 });
      expect(await idempotency.release(batch[0]!, acquired(r))).toBe(true);
    }
    expect(await store.get(batch[0]!)).toMatchObject({ state: 'RELEASED', attempt: 0 });
    const result = await idempotency.run(batch[0]!, (ctx) => ctx.attempt);
    expect(result).toMatchObject({ outcome: 'ACQUIRED', status: 'completed', result: 1 });
  });

  it.each([true, false])(
    'a claim taken over from a lapsed handler and given back unrun leaves the next claim ACQUIRED_STALE (reserve: %s)',
    async (reserve) => {
      const { idempotency, clock } = setup();
      const first = await idempotency.claim(batch[0]!); // its handler starts, then its worker stalls
      expect(first.outcome).toBe('ACQUIRED');
      clock.ms += 10_001;
      const [taken] = await idempotency.claimMany([batch[0]!], { reserve });
      expect(taken).toMatchObject({ outcome: 'ACQUIRED_STALE', attempt: 2 });
      await idempotency.release(batch[0]!, acquired(taken)); // the batch was interrupted before it ran
      const seen: string[] = [];
      const result = await idempotency.run(batch[0]!, (ctx) => seen.push(`${ctx.outcome} ${ctx.attempt}`));
      expect(result).toMatchObject({ outcome: 'ACQUIRED_STALE', status: 'completed' });
      expect(seen).toEqual(['ACQUIRED_STALE 2']);
    },
  );

  it('a consumer that crashes after reserving, before any handler starts, spends no attempt', async () => {
    const { idempotency, clock } = setup();
    for (let crash = 0; crash < 4; crash++) {
      await idempotency.claimMany(batch); // then the process dies: nothing released, nothing started
      clock.ms += 10_001; // the reservations' leases lapse
    }
    const replies = await idempotency.claimMany(batch);
    // Not ACQUIRED_STALE: no handler of an earlier reservation ran, so nothing can be partial.
    expect(replies.map((r) => [r.outcome, r.attempt])).toEqual(batch.map(() => ['ACQUIRED', 1]));
  });

  it('a poison message that crashes its consumer while its handler runs still ends FAILED', async () => {
    const { idempotency, clock } = setup();
    const handlerRuns: number[] = [];
    for (let crash = 0; crash < 2; crash++) {
      const [r] = await idempotency.claimMany([batch[0]!]);
      expect(r!.outcome).toMatch(/^ACQUIRED/);
      // The handler starts (start counts its attempt), then the process dies mid-handler.
      const started = await idempotency.store.start(batch[0]!, r!.fencingToken, {
        leaseMs: 10_000,
        retentionMs: 60_000,
      });
      expect(started).toMatchObject({ ok: true, attempt: crash + 1 });
      handlerRuns.push(crash + 1);
      clock.ms += 10_001;
    }
    const [last] = await idempotency.claimMany([batch[0]!]);
    expect(last).toMatchObject({ outcome: 'FAILED', attempt: 2, deadLettered: false });
    expect((last as { error: string }).error).toMatch(/ATTEMPTS_EXHAUSTED: 2 of 2 .*lost its lease/);
    expect(handlerRuns).toEqual([1, 2]);
  });

  it('a reservation lost before its handler starts: execute runs nothing and reports lease-lost', async () => {
    const { idempotency, clock, events } = setup();
    const [r] = await idempotency.claimMany([batch[0]!]);
    clock.ms += 10_001;
    const [other] = await idempotency.claimMany([batch[0]!]); // another consumer takes the lapsed reservation
    expect(other!.outcome).toBe('ACQUIRED');
    const handler = jest.fn();
    const result = await idempotency.execute(batch[0]!, acquired(r), handler);
    expect(handler).not.toHaveBeenCalled();
    expect(result).toMatchObject({ status: 'lease-lost', handlerStarted: false, handlerCompleted: false });
    expect(events.filter(([n]) => n === 'leaseLost').map(([, p]) => p.during)).toEqual(['start']);
  });

  it('claimMany with reserve: false counts at once, like claim', async () => {
    const { idempotency, store } = setup();
    const [r] = await idempotency.claimMany([batch[0]!], { reserve: false });
    expect(r).toMatchObject({ outcome: 'ACQUIRED', started: true, attempt: 1 });
    expect(await store.get(batch[0]!)).toMatchObject({ attempt: 1, reserved: false });
  });
});

describe('dead-lettered once', () => {
  it('markDeadLettered: the first call sets the mark; later claims settle FAILED with deadLettered true', async () => {
    const { idempotency } = setup();
    const failed = await idempotency.run(batch[0]!, () => {
      throw Object.assign(new Error('bad'), { retryable: false });
    });
    expect(failed).toMatchObject({ status: 'failed', reason: 'non-retryable' });
    const redelivered = await idempotency.run(batch[0]!, jest.fn());
    expect(redelivered).toMatchObject({ outcome: 'FAILED', deadLettered: false });
    expect(await idempotency.markDeadLettered(batch[0]!, redelivered as { fencingToken: number })).toBe(true);
    expect(await idempotency.markDeadLettered(batch[0]!, redelivered as { fencingToken: number })).toBe(
      false,
    );
    expect(await idempotency.run(batch[0]!, jest.fn())).toMatchObject({
      outcome: 'FAILED',
      deadLettered: true,
    });
  });
});
