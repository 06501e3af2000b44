import { Idempotency, MemoryIdempotencyStore, NonRetryableError } from '../src';

/** A holder whose handler runs until `finish` is called with what it should do. */
function setup(conflictWaitMs = 10_000) {
  const store = new MemoryIdempotencyStore();
  const idempotency = new Idempotency({ store }, { leaseMs: 30_000, conflictWaitMs, maxAttempts: 3 });
  let finish!: (how: () => unknown) => void;
  const ending = new Promise<() => unknown>((r) => (finish = r));
  let running!: () => void;
  const isRunning = new Promise<void>((r) => (running = r));
  const holder = idempotency.run(request, async () => {
    running();
    return (await ending)();
  });
  return { store, idempotency, holder, isRunning, finish };
}

const request = { scope: 'payments', key: 'p-1', payload: { amount: 5 } };

describe('run with conflictWaitMs: a duplicate is answered when the holder finishes', () => {
  it('the holder completes: the duplicate settles DUPLICATE with its result, without waiting for the bound', async () => {
    const t = setup();
    await t.isRunning;
    const duplicateHandler = jest.fn();
    const startedAt = Date.now();
    const duplicate = t.idempotency.run(request, duplicateHandler);
    t.finish(() => ({ charged: 5 }));
    expect(await t.holder).toMatchObject({ status: 'completed', recorded: true });
    expect(await duplicate).toMatchObject({ outcome: 'DUPLICATE', result: { charged: 5 } });
    expect(duplicateHandler).not.toHaveBeenCalled();
    expect(Date.now() - startedAt).toBeLessThan(5_000);
  });

  it('the holder releases (retryable error): the duplicate claims and runs as attempt 2', async () => {
    const t = setup();
    await t.isRunning;
    const duplicate = t.idempotency.run(request, (ctx) => `ran as ${ctx.attempt}`);
    t.finish(() => {
      throw new Error('timeout downstream');
    });
    expect(await t.holder).toMatchObject({ status: 'released' });
    expect(await duplicate).toMatchObject({ outcome: 'ACQUIRED', status: 'completed', result: 'ran as 2' });
  });

  it('the holder fails (non-retryable): the duplicate settles FAILED', async () => {
    const t = setup();
    await t.isRunning;
    const duplicate = t.idempotency.run(request, jest.fn());
    t.finish(() => {
      throw new NonRetryableError('card declined');
    });
    expect(await t.holder).toMatchObject({ status: 'failed', reason: 'non-retryable' });
    expect(await duplicate).toMatchObject({
      outcome: 'FAILED',
      error: expect.stringContaining('card declined'),
    });
  });

  it('the bound passes first: CONFLICT; a per-call 0 answers at once', async () => {
    const t = setup(200);
    await t.isRunning;
    const startedAt = Date.now();
    expect(await t.idempotency.run(request, jest.fn())).toMatchObject({ outcome: 'CONFLICT' });
    expect(Date.now() - startedAt).toBeGreaterThanOrEqual(190);
    const store = jest.spyOn(t.store, 'waitForOutcome');
    expect(await t.idempotency.run(request, jest.fn(), { conflictWaitMs: 0 })).toMatchObject({
      outcome: 'CONFLICT',
    });
    expect(store).not.toHaveBeenCalled();
    t.finish(() => 'done');
    await t.holder;
  });

  it('waitForOutcome with reserve (a batch): the claim it ends with is a reservation; releasing it costs no attempt', async () => {
    const store = new MemoryIdempotencyStore();
    const idempotency = new Idempotency(
      { store },
      { leaseMs: 30_000, conflictWaitMs: 10_000, maxAttempts: 3 },
    );
    const holder = await store.claim(request, { leaseMs: 30_000, retentionMs: 60_000 });
    setTimeout(() => void store.release(request, holder.fencingToken, { retentionMs: 60_000 }), 20);
    const reply = await idempotency.waitForOutcome(request, { reserve: true });
    expect(reply).toMatchObject({ outcome: 'ACQUIRED', started: false, attempt: 2 });
    if (reply.outcome !== 'ACQUIRED') throw new Error(reply.outcome);
    expect(await idempotency.release(request, reply)).toBe(true); // the batch was interrupted
    expect(await store.get(request)).toMatchObject({ state: 'RELEASED', attempt: 1 });
  });

  it('no conflict: run never calls waitForOutcome (no extra round trip)', async () => {
    const store = new MemoryIdempotencyStore();
    const wait = jest.spyOn(store, 'waitForOutcome');
    const idempotency = new Idempotency({ store }, { conflictWaitMs: 5_000 });
    await idempotency.run(request, () => 1);
    await idempotency.run(request, () => 2);
    expect(wait).not.toHaveBeenCalled();
  });

  it('a bad conflictWaitMs is an InvalidOptionError', async () => {
    const store = new MemoryIdempotencyStore();
    expect(() => new Idempotency({ store }, { conflictWaitMs: -1 })).toThrow(/conflictWaitMs/);
    const idempotency = new Idempotency({ store });
    await expect(idempotency.run(request, () => 1, { conflictWaitMs: 1.5 })).rejects.toMatchObject({
      code: 'INVALID_OPTION',
    });
  });
});
