import { performance } from 'node:perf_hooks';
import { HandlerTimeoutError, Idempotency, MemoryIdempotencyStore, StoreUnavailableError } from '../src';
import { onFakeClock } from './support/fake-clock';
import { FaultyStore, recordEvents } from './support/faulty-store';

const request = { scope: 'deadlines', key: 'k' };
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const unavailable = () => new StoreUnavailableError('down');

describe("the lease counts from the claim's lease, not from execute", () => {
  // Fake timers: the runner's local clock (`performance.now`) and the store's clock (`Date.now`) follow
  // them, so "waited 1000 ms" and "aborts 2000 ms into execute" are exact. On real timers this test failed
  // on a loaded machine: a claim with less than one heartbeat interval (1000 ms) left is extended before its
  // handler, and that extension met the broken store (StoreUnavailableError), so the margin for a late
  // sleep was 1 s, not the 1.5 s its comment claimed; and under load `breakAlways` alone took up to 1.3 s
  // (it queued a million faults).
  it("the first local deadline is the claim's: a claim that waited 1000 of its 3000 ms aborts 2000 ms into execute", async () => {
    await onFakeClock(async () => {
      const store = new FaultyStore(new MemoryIdempotencyStore({ now: () => Date.now() }));
      const idempotency = new Idempotency({ store, logger: false }, { leaseMs: 3_000, retentionMs: 60_000 });
      const events = recordEvents(idempotency);
      const claim = await idempotency.claim(request);
      if (claim.outcome !== 'ACQUIRED') throw new Error(claim.outcome);
      await jest.advanceTimersByTimeAsync(1_000); // the claim waits (a batch ahead of it)
      store.breakAlways('extend', unavailable); // no heartbeat reaches the store
      const executeAt = performance.now();
      let abortedAfterMs = Number.NaN;
      const executed = idempotency.execute(
        request,
        claim,
        ({ signal }) =>
          new Promise<void>((resolve) =>
            signal.addEventListener('abort', () => {
              abortedAfterMs = performance.now() - executeAt;
              resolve();
            }),
          ),
      );
      // Counted from execute it would be 3000 ms; counted from the claim it is 2000 ms.
      await jest.advanceTimersByTimeAsync(1_999);
      expect(abortedAfterMs).toBeNaN();
      await jest.advanceTimersByTimeAsync(1);
      expect(abortedAfterMs).toBe(2_000);
      expect(await executed).toMatchObject({ status: 'completed', recorded: true });
      // The 2000 ms left were more than a heartbeat interval, so no extension came before the handler; the
      // keeper's beat (1000 ms into execute) was refused, and the lease ran out by the local clock.
      expect(store.calls.extend).toBeGreaterThanOrEqual(1);
      expect(events.filter(([n]) => n === 'leaseLost').map(([, p]) => p.during)).toEqual(['local-deadline']);
    });
  });

  it('a claim whose lease ran out before execute, nobody claimed since: one extension takes it back and it runs', async () => {
    const idempotency = new Idempotency(
      { store: new MemoryIdempotencyStore() },
      { leaseMs: 100, retentionMs: 60_000 },
    );
    const events = recordEvents(idempotency);
    const claim = await idempotency.claim(request);
    if (claim.outcome !== 'ACQUIRED') throw new Error(claim.outcome);
    await sleep(150);
    const result = await idempotency.execute(request, claim, ({ signal }) => signal.aborted);
    expect(result).toMatchObject({ status: 'completed', result: false, recorded: true });
    expect(events.filter(([n]) => n === 'leaseLost')).toEqual([]);
  });

  it('a claim whose lease ran out and was taken by another worker: the handler does not run', async () => {
    let offset = 0;
    const store = new MemoryIdempotencyStore({ now: () => Date.now() + offset });
    const a = new Idempotency({ store }, { leaseMs: 100, retentionMs: 60_000 });
    const b = new Idempotency({ store }, { leaseMs: 10_000, retentionMs: 60_000 });
    const claim = await a.claim(request);
    if (claim.outcome !== 'ACQUIRED') throw new Error(claim.outcome);
    offset += 1_000;
    expect(await b.claim(request)).toMatchObject({ outcome: 'ACQUIRED_STALE' });
    await sleep(150); // A's lease has run out by A's own clock too
    const handler = jest.fn();
    const result = await a.execute(request, claim, handler);
    expect(handler).not.toHaveBeenCalled();
    expect(result).toMatchObject({ status: 'lease-lost', handlerStarted: false, handlerCompleted: false });
  });
});

describe('after a conflict wait, the lease counts from the claim the wait ended with', () => {
  // A reply 1000 ms late leaves 2000 ms, above the heartbeat interval (1000 ms): the keeper starts without a
  // renewal (a claim with less left is extended first), even when the machine is slow by up to ~1 s.
  it('a reply that arrives 1000 ms after its claim was sent leaves 2000 of a 3000 ms lease', async () => {
    class SlowReplies extends MemoryIdempotencyStore {
      override async waitForOutcome(
        ...args: Parameters<MemoryIdempotencyStore['waitForOutcome']>
      ): ReturnType<MemoryIdempotencyStore['waitForOutcome']> {
        const reply = await super.waitForOutcome(...args);
        await sleep(1_000); // the claim was applied; its reply is slow to arrive
        return reply;
      }
      override async extend(): ReturnType<MemoryIdempotencyStore['extend']> {
        throw unavailable(); // no heartbeat lands
      }
    }
    const store = new SlowReplies();
    const idempotency = new Idempotency(
      { store },
      { leaseMs: 3_000, retentionMs: 60_000, conflictWaitMs: 10_000 },
    );
    const holder = await store.claim(request, { leaseMs: 60_000, retentionMs: 60_000 });
    setTimeout(() => void store.release(request, holder.fencingToken, { retentionMs: 60_000 }), 50);
    let abortedAfterMs = Number.NaN;
    const result = await idempotency.run(request, ({ signal }) => {
      const startedAt = performance.now();
      return new Promise<void>((resolve) =>
        signal.addEventListener('abort', () => {
          abortedAfterMs = performance.now() - startedAt;
          resolve();
        }),
      );
    });
    expect(result).toMatchObject({ outcome: 'ACQUIRED' });
    // Counted from the reply it would be about 3000 ms; from the claim, about 2000 ms.
    expect(abortedAfterMs).toBeLessThan(2_800);
  });
});

describe('handlerTimeoutMs', () => {
  it('a handler that ignores its signal and never returns: aborted, released (retryable) at the bound', async () => {
    const store = new MemoryIdempotencyStore();
    const idempotency = new Idempotency(
      { store },
      { leaseMs: 10_000, handlerTimeoutMs: 200, maxAttempts: 2 },
    );
    let reason: unknown;
    const startedAt = performance.now();
    const result = await idempotency.run(request, ({ signal }) => {
      signal.addEventListener('abort', () => {
        reason = signal.reason;
      });
      return new Promise(() => {}); // hangs forever
    });
    expect(performance.now() - startedAt).toBeGreaterThanOrEqual(190);
    expect(result).toMatchObject({ status: 'released', recorded: true, attempt: 1 });
    expect((result as { error: unknown }).error).toBeInstanceOf(HandlerTimeoutError);
    expect(reason).toBe((result as { error: unknown }).error);
    expect(await store.get(request)).toMatchObject({ state: 'RELEASED' });
    // The last attempt: FAILED with attempts-exhausted.
    const last = await idempotency.run(request, () => new Promise(() => {}));
    expect(last).toMatchObject({ status: 'failed', reason: 'attempts-exhausted', attempt: 2 });
  });

  it('the next delivery after a timed-out handler is ACQUIRED_STALE: the first handler may still be running', async () => {
    const store = new MemoryIdempotencyStore();
    const idempotency = new Idempotency({ store }, { leaseMs: 10_000, handlerTimeoutMs: 50, maxAttempts: 3 });
    let finishFirst: () => void = () => {};
    const first = await idempotency.run(
      request,
      () =>
        new Promise<void>((resolve) => {
          finishFirst = resolve; // still running after the timeout: it ignores its signal
        }),
    );
    expect(first).toMatchObject({ status: 'released', attempt: 1 });
    expect(await store.get(request)).toMatchObject({ state: 'RELEASED', abandoned: true });
    const seen: string[] = [];
    const second = await idempotency.run(request, ({ outcome }) => {
      seen.push(outcome);
      return 'second';
    });
    finishFirst();
    expect(seen).toEqual(['ACQUIRED_STALE']);
    expect(second).toMatchObject({ outcome: 'ACQUIRED_STALE', status: 'completed', attempt: 2 });
    // A handler that threw (it ended) releases without the mark: the next claim is ACQUIRED.
    const other = { scope: 'deadlines', key: 'threw' };
    await idempotency.run(other, () => {
      throw new Error('retry me');
    });
    expect(await store.get(other)).toMatchObject({ state: 'RELEASED', abandoned: false });
    expect(await idempotency.run(other, () => 'ok')).toMatchObject({ outcome: 'ACQUIRED' });
  });

  it('the last attempt timed out: FAILED and marked abandoned (that handler may still run); one that threw is not', async () => {
    const store = new MemoryIdempotencyStore();
    const idempotency = new Idempotency({ store }, { leaseMs: 10_000, handlerTimeoutMs: 50, maxAttempts: 1 });
    let finish: () => void = () => {};
    const last = await idempotency.run(
      request,
      () =>
        new Promise<void>((resolve) => {
          finish = resolve; // still running after the timeout: it ignores its signal
        }),
    );
    finish();
    expect(last).toMatchObject({ status: 'failed', reason: 'attempts-exhausted', attempt: 1 });
    expect(await store.get(request)).toMatchObject({ state: 'FAILED', abandoned: true });
    // A handler that ended (it threw) at the last attempt, or with an error that is not retryable: not marked.
    const threw = { scope: 'deadlines', key: 'threw-last' };
    await idempotency.run(threw, () => {
      throw new Error('boom');
    });
    expect(await store.get(threw)).toMatchObject({ state: 'FAILED', abandoned: false });
    const rejected = { scope: 'deadlines', key: 'non-retryable' };
    await idempotency.run(rejected, () => {
      throw Object.assign(new Error('declined'), { retryable: false });
    });
    expect(await store.get(rejected)).toMatchObject({ state: 'FAILED', abandoned: false });
  });

  it('released even when isRetryable says otherwise: a timeout is not the handler saying the work is bad', async () => {
    const idempotency = new Idempotency(
      { store: new MemoryIdempotencyStore() },
      { handlerTimeoutMs: 50, isRetryable: () => false },
    );
    expect(await idempotency.run(request, () => new Promise(() => {}))).toMatchObject({ status: 'released' });
  });

  it('a handler within the bound completes as usual; per-call 0 turns the bound off', async () => {
    const idempotency = new Idempotency({ store: new MemoryIdempotencyStore() }, { handlerTimeoutMs: 5_000 });
    expect(await idempotency.run(request, () => 'quick')).toMatchObject({
      status: 'completed',
      result: 'quick',
    });
    const other = { scope: 'deadlines', key: 'off' };
    expect(
      await idempotency.run(other, () => sleep(30).then(() => 'slow'), { handlerTimeoutMs: 0 }),
    ).toMatchObject({ status: 'completed' });
    await expect(idempotency.run(other, () => 1, { handlerTimeoutMs: -1 })).rejects.toMatchObject({
      code: 'INVALID_OPTION',
    });
  });

  // Node fires a timer whose delay exceeds 2^31 - 1 ms (about 24.8 days) after 1 ms. A bound that long
  // (or Number.MAX_SAFE_INTEGER as "practically none") aborted the handler at once and released its key
  // abandoned, so a redelivery ran the handler a second time while the first was still running.
  it.each([2 ** 31, Number.MAX_SAFE_INTEGER])(
    'a bound longer than a Node timer holds (%d ms) does not abort the handler, and its key stays held',
    async (handlerTimeoutMs) => {
      const idempotency = new Idempotency(
        { store: new MemoryIdempotencyStore(), logger: false },
        { handlerTimeoutMs },
      );
      const key = { scope: 'deadlines', key: `long-${handlerTimeoutMs}` };
      let redelivery: string | undefined;
      let finished!: () => void;
      const handlerFinished = new Promise<void>((resolve) => (finished = resolve));
      const result = idempotency.run(key, async ({ signal }) => {
        await sleep(30); // a 1 ms timer created before this one fires first
        redelivery = (await idempotency.claim(key)).outcome; // while this handler still runs
        finished();
        return signal.aborted;
      });
      await handlerFinished;
      expect(redelivery).toBe('CONFLICT');
      expect(await result).toMatchObject({ status: 'completed', result: false });
    },
  );
});

describe('maxAttempts and a stalled holder', () => {
  it('the record turned FAILED only because the last lease lapsed: that holder may still complete it', async () => {
    let offset = 0;
    const store = new MemoryIdempotencyStore({ now: () => Date.now() + offset });
    const idempotency = new Idempotency({ store }, { leaseMs: 10_000, retentionMs: 60_000, maxAttempts: 1 });
    let resume!: () => void;
    const resumed = new Promise<void>((r) => (resume = r));
    let running!: () => void;
    const isRunning = new Promise<void>((r) => (running = r));
    const stalled = idempotency.run(request, async () => {
      running();
      await resumed; // a GC pause, a slow downstream: the lease lapses meanwhile
      return 'charged once';
    });
    await isRunning;
    offset += 20_000;
    const redelivery = await idempotency.run(request, jest.fn());
    expect(redelivery).toMatchObject({ outcome: 'FAILED', error: expect.stringMatching(/lost its lease/) });
    resume();
    expect(await stalled).toMatchObject({ status: 'completed', recorded: true, result: 'charged once' });
    expect(await idempotency.run(request, jest.fn())).toMatchObject({
      outcome: 'DUPLICATE',
      result: 'charged once',
    });
  });

  it('a record FAILED by fail() (non-retryable) is never completed by its holder', async () => {
    const store = new MemoryIdempotencyStore();
    const idempotency = new Idempotency({ store });
    const claim = await idempotency.claim(request);
    await store.fail(request, claim.fencingToken, { retentionMs: 1_000, error: 'E' });
    expect(await store.complete(request, claim.fencingToken, { retentionMs: 1_000 })).toMatchObject({
      ok: false,
      state: 'FAILED',
    });
  });
});
