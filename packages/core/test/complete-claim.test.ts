import {
  Idempotency,
  type IdempotencyOptions,
  MemoryIdempotencyStore,
  ResultTooLargeError,
  StoreUnavailableError,
} from '../src';
import type { CompletedResult } from '../src/runner/run-result';

/** A run whose handler returned `value` and whose write the store did not take (writeAttempts 1). */
async function unrecorded<T>(value: T, options: IdempotencyOptions = {}) {
  const store = new MemoryIdempotencyStore();
  const idempotency = new Idempotency({ store, logger: false }, { writeAttempts: 1, ...options });
  const events: { type: string; [field: string]: unknown }[] = [];
  for (const type of ['completed', 'resultOmitted', 'failed', 'leaseLost', 'storeError'] as const) {
    idempotency.on(type, (payload: object) => events.push({ type, ...payload }));
  }
  const complete = jest.spyOn(store, 'complete').mockRejectedValueOnce(new StoreUnavailableError('down'));
  const run = (await idempotency.run({ scope: 's', key: 'k' }, () => value)) as CompletedResult<T>;
  expect(run).toMatchObject({ status: 'completed', recorded: false });
  complete.mockRestore();
  events.length = 0;
  return { store, idempotency, events, run };
}

describe('Idempotency.completeClaim', () => {
  it('writes COMPLETED with the encoded result and emits completed (recorded)', async () => {
    const t = await unrecorded({ paid: 12 });
    const result = await t.idempotency.completeClaim({ scope: 's', key: 'k' }, t.run, 7);
    expect(result).toEqual({ ...t.run, recorded: true, resultOmitted: false, durationMs: 7 });
    expect(t.events).toEqual([
      expect.objectContaining({ type: 'completed', key: 'k', recorded: true, durationMs: 7 }),
    ]);
    const replay = await t.idempotency.run({ scope: 's', key: 'k' }, () => ({ paid: 0 }));
    expect(replay).toMatchObject({ outcome: 'DUPLICATE', result: { paid: 12 } });
  });

  it("without a durationMs: the run's own (the handler's run time the runner measured), on the result and the completed event", async () => {
    const t = await unrecorded({ paid: 12 });
    const result = await t.idempotency.completeClaim({ scope: 's', key: 'k' }, t.run);
    expect(result).toMatchObject({ status: 'completed', recorded: true, durationMs: t.run.durationMs });
    expect(t.events).toEqual([
      expect.objectContaining({ type: 'completed', recorded: true, durationMs: t.run.durationMs }),
    ]);
  });

  it.each([
    [undefined, 'write'],
    ['heartbeat', 'heartbeat'],
    ['local-deadline', 'local-deadline'],
  ] as const)(
    "refused (another claim holds the key), a run whose leaseLostDuring is %s: lease-lost, during '%s' (where the claim was lost first); the event says 'write'",
    async (lostDuring, during) => {
      let nowMs = 1_000_000;
      const store = new MemoryIdempotencyStore({ now: () => nowMs });
      const idempotency = new Idempotency({ store, logger: false }, { writeAttempts: 1, leaseMs: 1000 });
      const complete = jest.spyOn(store, 'complete').mockRejectedValueOnce(new StoreUnavailableError('down'));
      const ran = (await idempotency.run({ scope: 's', key: 'k' }, () => 'v')) as CompletedResult<string>;
      complete.mockRestore();
      nowMs += 5000;
      await store.claim({ scope: 's', key: 'k' }, { leaseMs: 1000, retentionMs: 60_000, maxAttempts: 3 });
      const lost: unknown[] = [];
      idempotency.on('leaseLost', (e) => lost.push(e.during));
      const run = lostDuring === undefined ? ran : { ...ran, leaseLostDuring: lostDuring };
      const result = await idempotency.completeClaim({ scope: 's', key: 'k' }, run);
      expect(result).toMatchObject({ status: 'lease-lost', during, handlerCompleted: true, result: 'v' });
      expect(lost).toEqual(['write']);
    },
  );

  it("omits a result too large under onResultTooLarge 'omit', with resultOmitted", async () => {
    const t = await unrecorded('x'.repeat(300), { maxResultBytes: 100, compressAboveBytes: Infinity });
    expect(t.run.resultOmitted).toBe(true); // the unrecorded write would have left it out too
    const result = await t.idempotency.completeClaim({ scope: 's', key: 'k' }, t.run);
    expect(result).toMatchObject({ status: 'completed', recorded: true, resultOmitted: true });
    expect(t.events.map((e) => e.type)).toEqual(['resultOmitted', 'completed']);
    expect(await t.store.get({ scope: 's', key: 'k' })).toMatchObject({ state: 'COMPLETED' });
  });

  it("writes FAILED for a result too large under onResultTooLarge 'fail'", async () => {
    const t = await unrecorded('x', { maxResultBytes: 100, onResultTooLarge: 'fail' });
    const big = { ...t.run, result: 'y'.repeat(300) };
    const result = await t.idempotency.completeClaim({ scope: 's', key: 'k' }, big);
    expect(result).toMatchObject({ status: 'failed', reason: 'result-too-large', recorded: true });
    expect((result as { error: unknown }).error).toBeInstanceOf(ResultTooLargeError);
    expect(t.events).toEqual([expect.objectContaining({ type: 'failed', reason: 'result-too-large' })]);
    expect(await t.store.get({ scope: 's', key: 'k' })).toMatchObject({
      state: 'FAILED',
      error: expect.stringMatching(
        /^ResultTooLargeError \[RESULT_TOO_LARGE\]: The handler result is \d+ bytes/,
      ),
    });
  });

  it('rejects with the store error after a storeError event (the caller decides to try again)', async () => {
    const t = await unrecorded('v');
    jest.spyOn(t.store, 'complete').mockRejectedValueOnce(new StoreUnavailableError('down'));
    await expect(t.idempotency.completeClaim({ scope: 's', key: 'k' }, t.run)).rejects.toBeInstanceOf(
      StoreUnavailableError,
    );
    expect(t.events).toEqual([expect.objectContaining({ type: 'storeError', operation: 'complete' })]);
  });
});
