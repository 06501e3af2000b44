import {
  fingerprint,
  Idempotency,
  type IdempotencyOptions,
  MemoryIdempotencyStore,
  NonRetryableError,
} from '../src';
import { recordEvents } from './support/faulty-store';

/** A runner on the in-memory store with a fake clock (`clock.ms`). */
function setup(options: IdempotencyOptions = {}) {
  const clock = { ms: 1_700_000_000_000 };
  const store = new MemoryIdempotencyStore({ now: () => clock.ms });
  const idempotency = new Idempotency({ store }, { leaseMs: 10_000, retentionMs: 60_000, ...options });
  const events = recordEvents(idempotency);
  return { clock, store, idempotency, events };
}

const request = { scope: 'orders', key: 'order-1', payload: { amount: 42, currency: 'EUR' } };
/** The fencing token of a first claim at the fake clock's start: the clock in microseconds. */
const T1 = 1_700_000_000_000 * 1000;

describe('Idempotency.run outcomes (in-memory store, fake clock)', () => {
  it('ACQUIRED: runs the handler once with the claim context and completes the record', async () => {
    const { idempotency, store, events } = setup();
    const contexts: unknown[] = [];
    const result = await idempotency.run(request, (ctx) => {
      contexts.push({ ...ctx, signal: ctx.signal.aborted });
      return { charged: 42 };
    });
    expect(result).toEqual({
      outcome: 'ACQUIRED',
      status: 'completed',
      fencingToken: T1,
      attempt: 1,
      result: { charged: 42 },
      recorded: true,
      resultOmitted: false,
      durationMs: expect.any(Number),
    });
    expect(contexts).toEqual([
      { scope: 'orders', key: 'order-1', fencingToken: T1, attempt: 1, outcome: 'ACQUIRED', signal: false },
    ]);
    expect(await store.get(request)).toMatchObject({
      state: 'COMPLETED',
      result: 'j{"charged":42}',
      fingerprint: fingerprint(request.payload),
    });
    expect(events.map(([name]) => name)).toEqual(['outcome', 'completed']);
    expect(events[0]![1]).toEqual({
      scope: 'orders',
      key: 'order-1',
      outcome: 'ACQUIRED',
      attempt: 1,
      fencingToken: T1,
    });
    expect(events[1]![1]).toMatchObject({ attempt: 1, fencingToken: T1, recorded: true });
    expect(events[1]![1].durationMs).toEqual(expect.any(Number));
  });

  it('DUPLICATE: does not run the handler again and replays the stored result', async () => {
    const { idempotency, events } = setup();
    const handler = jest.fn(() => ({ charged: 42, at: [1, 2, 3] }));
    await idempotency.run(request, handler);
    const again = await idempotency.run(request, handler);
    expect(handler).toHaveBeenCalledTimes(1);
    expect(again).toEqual({
      outcome: 'DUPLICATE',
      result: { charged: 42, at: [1, 2, 3] },
      hasResult: true,
      fencingToken: T1,
      attempt: 1,
      completedAtMs: 1_700_000_000_000,
    });
    expect(events.map(([n, p]) => `${n}:${p.outcome ?? ''}`)).toEqual([
      'outcome:ACQUIRED',
      'completed:',
      'outcome:DUPLICATE',
    ]);
  });

  it('DUPLICATE of a handler that returned undefined: hasResult false', async () => {
    const { idempotency } = setup();
    await idempotency.run(request, () => undefined);
    expect(await idempotency.run(request, () => 1)).toMatchObject({
      outcome: 'DUPLICATE',
      result: undefined,
      hasResult: false,
    });
  });

  it('CONFLICT: another worker holds a live lease; the handler does not run', async () => {
    const { idempotency, clock, events } = setup();
    let release!: () => void;
    const first = idempotency.run(request, () => new Promise<void>((r) => (release = r)));
    await new Promise((r) => setImmediate(r));
    clock.ms += 4_000;
    const handler = jest.fn();
    const second = await idempotency.run(request, handler);
    expect(handler).not.toHaveBeenCalled();
    expect(second).toEqual({ outcome: 'CONFLICT', retryAfterMs: 6_000, fencingToken: T1, attempt: 1 });
    release();
    expect(await first).toMatchObject({ status: 'completed' });
    expect(events.filter(([n]) => n === 'outcome').map(([, p]) => p.outcome)).toEqual([
      'ACQUIRED',
      'CONFLICT',
    ]);
  });

  it('ACQUIRED_STALE: the previous holder died mid-handler; the next run takes over with a greater token', async () => {
    const { idempotency, clock } = setup();
    // A worker that claimed and then died: its lease is never extended.
    const dead = await idempotency.claim(request);
    expect(dead.outcome).toBe('ACQUIRED');
    clock.ms += 10_001;
    const handler = jest.fn((ctx: { outcome: string; fencingToken: number; attempt: number }) => [
      ctx.outcome,
      ctx.fencingToken,
      ctx.attempt,
    ]);
    const result = await idempotency.run(request, handler);
    const T2 = clock.ms * 1000;
    expect(T2).toBeGreaterThan(dead.fencingToken);
    expect(result).toMatchObject({
      outcome: 'ACQUIRED_STALE',
      status: 'completed',
      fencingToken: T2,
      attempt: 2,
      result: ['ACQUIRED_STALE', T2, 2],
    });
    // The dead worker's late write is fenced off.
    expect(await idempotency.store.complete(request, dead.fencingToken, { retentionMs: 1 })).toMatchObject({
      ok: false,
      reason: 'LEASE_LOST',
      currentFencingToken: T2,
      state: 'COMPLETED',
    });
  });

  it('PAYLOAD_MISMATCH: the same key with another payload never runs (key order does not matter)', async () => {
    const { idempotency } = setup();
    await idempotency.run(request, () => 1);
    const reordered = { ...request, payload: { currency: 'EUR', amount: 42 } };
    expect(await idempotency.run(reordered, () => 2)).toMatchObject({ outcome: 'DUPLICATE', result: 1 });
    const handler = jest.fn();
    const other = await idempotency.run({ ...request, payload: { amount: 43, currency: 'EUR' } }, handler);
    expect(other).toEqual({ outcome: 'PAYLOAD_MISMATCH', state: 'COMPLETED', fencingToken: T1, attempt: 1 });
    expect(handler).not.toHaveBeenCalled();
    // A precomputed fingerprint takes precedence over the payload.
    expect(
      await idempotency.run(
        { ...request, payload: 'ignored', fingerprint: fingerprint(request.payload) },
        () => 3,
      ),
    ).toMatchObject({ outcome: 'DUPLICATE' });
  });

  it('retryable errors release the claim until maxAttempts, then the record is FAILED', async () => {
    const { idempotency, store, events } = setup({ maxAttempts: 3 });
    const error = new Error('downstream timeout');
    const results = [];
    for (let i = 0; i < 3; i++) results.push(await idempotency.run(request, () => Promise.reject(error)));
    expect(
      results.map((r) => [r.outcome, 'status' in r ? r.status : '', 'attempt' in r ? r.attempt : 0]),
    ).toEqual([
      ['ACQUIRED', 'released', 1],
      ['ACQUIRED', 'released', 2],
      ['ACQUIRED', 'failed', 3],
    ]);
    expect(results[0]).toMatchObject({ error, recorded: true });
    expect(results[2]).toMatchObject({ reason: 'attempts-exhausted', error, recorded: true });
    expect(await store.get(request)).toMatchObject({
      state: 'FAILED',
      attempt: 3,
      error: 'Error: downstream timeout',
    });
    const handler = jest.fn();
    expect(await idempotency.run(request, handler)).toEqual({
      outcome: 'FAILED',
      error: 'Error: downstream timeout',
      deadLettered: false,
      fencingToken: T1 + 2, // three claims within the same millisecond: the record's token + 1 each time
      attempt: 3,
    });
    expect(handler).not.toHaveBeenCalled();
    expect(events.map(([n]) => n)).toEqual([
      'outcome',
      'released',
      'outcome',
      'released',
      'outcome',
      'failed',
      'outcome',
    ]);
    expect(events[5]![1]).toMatchObject({ reason: 'attempts-exhausted', attempt: 3, recorded: true });
  });

  it('a per-call maxAttempts overrides the runner option', async () => {
    const { idempotency } = setup({ maxAttempts: 5 });
    const r = await idempotency.run(request, () => Promise.reject(new Error('x')), { maxAttempts: 1 });
    expect(r).toMatchObject({ status: 'failed', reason: 'attempts-exhausted', attempt: 1 });
  });

  it.each([
    ['NonRetryableError', new NonRetryableError('card declined', { cause: new Error('402') })],
    ['an error with retryable: false', Object.assign(new Error('bad input'), { retryable: false })],
  ])('%s goes straight to FAILED on the first attempt', async (_, error) => {
    const { idempotency, store, events } = setup({ maxAttempts: 5 });
    const r = await idempotency.run(request, () => {
      throw error;
    });
    expect(r).toMatchObject({
      outcome: 'ACQUIRED',
      status: 'failed',
      reason: 'non-retryable',
      attempt: 1,
      error,
    });
    expect((await store.get(request))?.state).toBe('FAILED');
    expect(events.map(([n]) => n)).toEqual(['outcome', 'failed']);
  });

  it('isRetryable decides which errors are retried', async () => {
    const { idempotency } = setup({ isRetryable: (e) => (e as Error).message === 'again' });
    expect(await idempotency.run(request, () => Promise.reject(new Error('again')))).toMatchObject({
      status: 'released',
    });
    expect(await idempotency.run(request, () => Promise.reject(new Error('never')))).toMatchObject({
      status: 'failed',
      reason: 'non-retryable',
      attempt: 2,
    });
  });

  it('claimMany + execute + settle: the batch API gives the same outcomes as run', async () => {
    const { idempotency } = setup();
    await idempotency.run({ scope: 's', key: 'done' }, () => 'old');
    await idempotency.claim({ scope: 's', key: 'busy' });
    const requests = ['done', 'busy', 'new'].map((key) => ({ scope: 's', key }));
    const replies = await idempotency.claimMany(requests);
    expect(replies.map((r) => r.outcome)).toEqual(['DUPLICATE', 'CONFLICT', 'ACQUIRED']);
    expect(idempotency.settle(replies[0]!)).toMatchObject({ outcome: 'DUPLICATE', result: 'old' });
    expect(idempotency.settle(replies[1]!)).toMatchObject({ outcome: 'CONFLICT' });
    const acquired = replies[2]!;
    if (acquired.outcome !== 'ACQUIRED') throw new Error('expected ACQUIRED');
    expect(await idempotency.execute(requests[2]!, acquired, () => 'new')).toMatchObject({
      status: 'completed',
      result: 'new',
    });
    expect(() => idempotency.settle(acquired)).toThrow(expect.objectContaining({ code: 'INVALID_OPTION' }));
  });

  it('a listener that throws does not change the outcome', async () => {
    const { idempotency } = setup();
    idempotency.on('completed', () => {
      throw new Error('listener bug');
    });
    expect(await idempotency.run(request, () => 1)).toMatchObject({ status: 'completed', recorded: true });
  });

  it('an async listener that rejects is isolated too: no unhandled rejection (which ends the process on Node >= 15)', async () => {
    const { idempotency } = setup();
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown) => unhandled.push(reason);
    process.on('unhandledRejection', onUnhandled);
    try {
      const rejected: unknown[] = [];
      for (const name of ['outcome', 'completed'] as const) {
        idempotency.on(name, async () => {
          const error = new Error(`${name} listener failed`);
          rejected.push(error);
          throw error;
        });
      }
      expect(await idempotency.run(request, () => 1)).toMatchObject({ status: 'completed', recorded: true });
      expect(rejected).toHaveLength(2);
      // Node reports a rejection nobody handled once the microtasks of the turn ran: by the next one.
      await new Promise((resolve) => setImmediate(resolve));
      expect(unhandled).toEqual([]);
    } finally {
      process.off('unhandledRejection', onUnhandled);
    }
  });
});
