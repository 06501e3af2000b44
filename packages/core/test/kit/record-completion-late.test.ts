import { once } from 'node:events';
import {
  type CompletedResult,
  Idempotency,
  MemoryIdempotencyStore,
  NonRetryableError,
  StoreUnavailableError,
} from '../../src';
import { StoreGate } from '../../src/kit';
import { recordCompletionLate } from '../../src/kit/record-completion-late';
import { FaultyStore } from '../support/faulty-store';

const id = { scope: 'late', key: 'k' };
const down = () => new StoreUnavailableError('Redis did not answer');
const fast = { storeProbeBackoff: { baseMs: 2, maxMs: 10, jitter: 'none' as const } };

/**
 * A run on `k` whose handler returned `'done'` and whose COMPLETED write the store did not answer (one
 * write attempt): the record is IN_PROGRESS, the run `completed` with `recorded: false`.
 */
async function unrecorded(storeFailureMode: 'closed' | 'open' = 'closed') {
  const store = new FaultyStore(new MemoryIdempotencyStore());
  const idempotency = new Idempotency(
    { store, logger: false },
    { leaseMs: 10_000, writeAttempts: 1, storeFailureMode },
  );
  store.inject('complete', { kind: 'throw', error: down });
  const run = (await idempotency.run(id, () => 'done')) as CompletedResult<string>;
  expect(run).toMatchObject({ status: 'completed', recorded: false });
  expect(await store.get(id)).toMatchObject({ state: 'IN_PROGRESS' });
  const gate = new StoreGate(store, fast);
  const errors: unknown[] = [];
  return { store, idempotency, run, gate, errors, onStoreError: (e: unknown) => errors.push(e) };
}

describe('kit: recordCompletionLate', () => {
  it('writes COMPLETED at once when the gate is open: the runner emits completed (recorded), a redelivery is a DUPLICATE', async () => {
    const { idempotency, run, gate } = await unrecorded();
    const completed = once(idempotency, 'completed');
    await recordCompletionLate(idempotency, id, run, { gate });
    expect((await completed)[0]).toMatchObject({ ...id, recorded: true, fencingToken: run.fencingToken });
    expect(await idempotency.store.get(id)).toMatchObject({ state: 'COMPLETED' });
    const again = jest.fn();
    expect(await idempotency.run(id, again)).toMatchObject({ outcome: 'DUPLICATE', result: 'done' });
    expect(again).not.toHaveBeenCalled();
  });

  it("the late write's completed event carries the handler's run time (durationMs), as the runner's unrecorded one did, not 0", async () => {
    const store = new FaultyStore(new MemoryIdempotencyStore());
    const idempotency = new Idempotency(
      { store, logger: false },
      { leaseMs: 10_000, writeAttempts: 1, storeFailureMode: 'closed' },
    );
    store.inject('complete', { kind: 'throw', error: down });
    const durations: { recorded: boolean; durationMs: number }[] = [];
    idempotency.on('completed', ({ recorded, durationMs }) => durations.push({ recorded, durationMs }));
    const run = (await idempotency.run(id, async () => {
      await new Promise((r) => setTimeout(r, 25)); // the handler's own work
      return 'done';
    })) as CompletedResult<string>;
    expect(run).toMatchObject({ status: 'completed', recorded: false });
    await recordCompletionLate(idempotency, id, run, { gate: new StoreGate(store, fast) });
    expect(durations).toEqual([
      { recorded: false, durationMs: expect.any(Number) },
      { recorded: true, durationMs: durations[0]!.durationMs },
    ]);
    expect(durations[0]!.durationMs).toBeGreaterThan(0);
  });

  it('a try the store does not answer closes the gate (failing closed) and is made again once a ping answers', async () => {
    const { store, idempotency, run, gate, errors, onStoreError } = await unrecorded();
    store
      .inject('complete', { kind: 'throw', error: down })
      .inject('ping', { kind: 'throw', error: down }, 2);
    const completed = once(idempotency, 'completed');
    await recordCompletionLate(idempotency, id, run, { gate, onStoreError });
    expect(errors).toEqual([expect.any(StoreUnavailableError)]);
    expect(gate.closed).toBe(true);
    expect((await completed)[0]).toMatchObject({ recorded: true });
    expect(store.calls.ping).toBe(3);
    expect(store.calls.complete).toBe(3); // the runner's, the first late try, the one after the ping
    expect(await idempotency.store.get(id)).toMatchObject({ state: 'COMPLETED' });
  });

  it('while the gate is closed: resolves at once without a try, and writes once it opens', async () => {
    const { store, idempotency, run, gate } = await unrecorded();
    store.inject('ping', { kind: 'throw', error: down }, 2);
    gate.close(down());
    const completed = once(idempotency, 'completed');
    await recordCompletionLate(idempotency, id, run, { gate });
    expect(store.calls.complete).toBe(1);
    await completed;
    expect(await idempotency.store.get(id)).toMatchObject({ state: 'COMPLETED' });
  });

  it('a reply lost after the store applied the write: the next try finds it written under this token (completed, recorded)', async () => {
    const { store, idempotency, run, gate } = await unrecorded();
    store.inject('complete', { kind: 'applyThenThrow', error: down });
    const completed = once(idempotency, 'completed');
    await recordCompletionLate(idempotency, id, run, { gate });
    expect((await completed)[0]).toMatchObject({ recorded: true });
    expect(store.calls.complete).toBe(3);
  });

  it('refused (another claim took the key after the lease lapsed): leaseLost during write, nothing more tried', async () => {
    const { store, idempotency, run, gate } = await unrecorded();
    // The lease lapsed and another worker took the key over.
    await store.inner.release(id, run.fencingToken, { retentionMs: 10_000 });
    const taken = await idempotency.claim(id);
    expect(taken.outcome).toBe('ACQUIRED');
    const lost = once(idempotency, 'leaseLost');
    await recordCompletionLate(idempotency, id, run, { gate });
    expect((await lost)[0]).toMatchObject({ during: 'write', fencingToken: run.fencingToken });
    expect(gate.closed).toBe(false);
    expect(await idempotency.store.get(id)).toMatchObject({ state: 'IN_PROGRESS' });
  });

  it('an error that is not an outage is reported and not retried; the gate stays open', async () => {
    const { store, idempotency, run, gate, errors, onStoreError } = await unrecorded();
    store.inject('complete', { kind: 'throw', error: () => new NonRetryableError('refused') });
    await recordCompletionLate(idempotency, id, run, { gate, onStoreError });
    expect(errors).toEqual([expect.any(NonRetryableError)]);
    expect(gate.closed).toBe(false);
    expect(store.calls.complete).toBe(2);
  });

  it('a runner that fails open does not close the gate for it: one try', async () => {
    const { store, idempotency, run, gate, errors, onStoreError } = await unrecorded('open');
    store.inject('complete', { kind: 'throw', error: down });
    await recordCompletionLate(idempotency, id, run, { gate, onStoreError });
    expect(errors).toHaveLength(1);
    expect(gate.closed).toBe(false);
    expect(store.calls.complete).toBe(2);
  });

  it("closeGate: 'always' closes it for a runner that fails open too: tried again once a ping answers", async () => {
    const { store, idempotency, run, gate, errors, onStoreError } = await unrecorded('open');
    store.inject('complete', { kind: 'throw', error: down });
    const completed = once(idempotency, 'completed');
    await recordCompletionLate(idempotency, id, run, { gate, closeGate: 'always', onStoreError });
    expect(errors).toHaveLength(1);
    expect((await completed)[0]).toMatchObject({ recorded: true });
    expect(store.calls.complete).toBe(3); // the runner's, the first late try, the one after the ping
  });

  it('tries nothing once the signal aborted or the gate was disposed, and stops trying when the signal aborts', async () => {
    const { store, idempotency, run, gate } = await unrecorded();
    const stopped = AbortSignal.abort();
    await recordCompletionLate(idempotency, id, run, { gate, signal: stopped });
    const disposed = new StoreGate(store, fast);
    disposed.dispose();
    await recordCompletionLate(idempotency, id, run, { gate: disposed });
    expect(store.calls.complete).toBe(1);

    store
      .inject('complete', { kind: 'throw', error: down })
      .inject('ping', { kind: 'throw', error: down }, 1000);
    const stopping = new AbortController();
    await recordCompletionLate(idempotency, id, run, { gate, signal: stopping.signal });
    stopping.abort();
    store.heal();
    await gate.waitUntilOpen(); // woken after any waiter the write still had
    await new Promise((r) => setImmediate(r));
    expect(store.calls.complete).toBe(2);
    expect(await idempotency.store.get(id)).toMatchObject({ state: 'IN_PROGRESS' });
  });
});

describe('kit: recordCompletionLate ignores what is no unrecorded completion', () => {
  it('a recorded run, a duplicate, a released run: nothing is written', async () => {
    const store = new FaultyStore(new MemoryIdempotencyStore());
    const idempotency = new Idempotency({ store, logger: false }, { leaseMs: 10_000, maxAttempts: 3 });
    const recorded = await idempotency.run(id, () => 'done');
    const duplicate = await idempotency.run(id, () => 'again');
    const released = await idempotency.run({ ...id, key: 'r' }, () => {
      throw new Error('transient');
    });
    for (const run of [recorded, duplicate, released]) await recordCompletionLate(idempotency, id, run);
    expect(store.calls.complete).toBe(1);
  });
});
