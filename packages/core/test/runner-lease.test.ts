import { performance } from 'node:perf_hooks';
import { Idempotency, LeaseLostError, MemoryIdempotencyStore, StoreUnavailableError } from '../src';
import { onFakeClock } from './support/fake-clock';
import { FaultyStore, recordEvents } from './support/faulty-store';

// Short leases (90-150 ms). A test whose outcome depends on when a beat or the local deadline is due runs
// on a fake clock (support/fake-clock.ts): on a busy machine real timers run late by more than a beat
// interval of such a lease, and the lease then really lapses.

const request = { scope: 'lease', key: 'k' };
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const unavailable = () => new StoreUnavailableError('Redis did not answer');

describe('Idempotency runner: heartbeat and lease loss', () => {
  // A 1500 ms lease beats every 500 ms: on a loaded machine (two Jest workers on two cores) a timer may run
  // late by a good part of a second, and the lease must outlast that.
  it('the heartbeat keeps a 1500 ms lease for a 3 s handler: every rival claim is CONFLICT', async () => {
    const store = new MemoryIdempotencyStore();
    const idempotency = new Idempotency({ store, logger: false }, { leaseMs: 1_500, retentionMs: 60_000 });
    const rival = new Idempotency({ store, logger: false }, { leaseMs: 1_500, retentionMs: 60_000 });
    const extends_: number[] = [];
    let running = true;
    const run = idempotency.run(
      request,
      async ({ signal }) => {
        await sleep(3000);
        running = false;
        return signal.aborted;
      },
      { onHeartbeat: ({ leaseExpiresAtMs }) => void extends_.push(leaseExpiresAtMs) },
    );
    const rivalOutcomes = new Set<string>();
    while (running) {
      const r = await rival.run(request, () => 'rival ran');
      rivalOutcomes.add(r.outcome);
      await sleep(10);
    }
    expect(await run).toMatchObject({
      outcome: 'ACQUIRED',
      status: 'completed',
      result: false,
      recorded: true,
    });
    expect([...rivalOutcomes]).toEqual(['CONFLICT']);
    // ~3000 ms / 500 ms per beat; at least one beat per lease.
    expect(extends_.length).toBeGreaterThanOrEqual(3);
    expect(extends_).toEqual([...extends_].sort((a, b) => a - b));
  });

  // A lease of 7e9 ms beats every 2.33e9 ms: longer than a Node timer holds (2^31 - 1 ms), which Node fires
  // after 1 ms. The heartbeat then extended the lease every millisecond for as long as the handler ran.
  it('a heartbeat interval longer than a Node timer holds does not extend the lease every millisecond', async () => {
    const store = new FaultyStore(new MemoryIdempotencyStore());
    const idempotency = new Idempotency({ store, logger: false }, { leaseMs: 7_000_000_000 });
    const result = await idempotency.run(request, async ({ signal }) => {
      await sleep(30); // 1 ms timers created before this one fire first
      return signal.aborted;
    });
    expect(result).toMatchObject({ status: 'completed', result: false });
    expect(store.calls.extend).toBe(0);
  });

  it('a handler that reads signal only after the claim was lost gets it already aborted', async () => {
    let offset = 0;
    const store = new MemoryIdempotencyStore({ now: () => Date.now() + offset });
    const a = new Idempotency({ store }, { leaseMs: 150, retentionMs: 60_000 });
    const b = new Idempotency({ store }, { leaseMs: 150, retentionMs: 60_000 });
    const lost = new Promise<void>((resolve) => a.once('leaseLost', () => resolve()));
    let started!: () => void;
    const isRunning = new Promise<void>((r) => (started = r));
    const first = a.run(request, async (context) => {
      started();
      await lost; // the keeper created no AbortController so far: nobody read signal
      return { aborted: context.signal.aborted, reason: context.signal.reason };
    });
    await isRunning;
    offset = 1_000; // a's lease has expired on the store's clock
    expect(await b.run(request, () => 'b')).toMatchObject({ outcome: 'ACQUIRED_STALE', status: 'completed' });
    const r = await first;
    expect(r).toMatchObject({ status: 'lease-lost', handlerCompleted: true });
    const value = (r as { result: { aborted: boolean; reason: unknown } }).result;
    expect(value.aborted).toBe(true);
    expect(value.reason).toBeInstanceOf(LeaseLostError);
  });

  it('the signal aborts with LeaseLostError when another worker took over after the lease expired', async () => {
    let offset = 0;
    const store = new MemoryIdempotencyStore({ now: () => Date.now() + offset });
    const a = new Idempotency({ store }, { leaseMs: 150, retentionMs: 60_000 });
    const b = new Idempotency({ store }, { leaseMs: 150, retentionMs: 60_000 });
    const events = recordEvents(a);
    let abortedWith: unknown;
    let started!: () => void;
    const isRunning = new Promise<void>((r) => (started = r));
    const first = a.run(request, async ({ signal }) => {
      started();
      await new Promise<void>((resolve) =>
        signal.addEventListener('abort', () => {
          abortedWith = signal.reason;
          resolve();
        }),
      );
      return 'finished after the abort';
    });
    await isRunning;
    offset += 1_000; // the store's clock jumps past A's lease (a stalled worker, a GC pause)
    const second = await b.run(request, () => 'b');
    expect(second).toMatchObject({ outcome: 'ACQUIRED_STALE', status: 'completed', attempt: 2 });
    const [firstToken, secondToken] = [
      events.find(([n]) => n === 'outcome')![1].fencingToken as number,
      (second as { fencingToken: number }).fencingToken,
    ];
    expect(secondToken).toBeGreaterThan(firstToken);
    const result = await first;
    expect(abortedWith).toBeInstanceOf(LeaseLostError);
    expect(abortedWith).toMatchObject({ code: 'LEASE_LOST', retryable: true });
    expect(result).toEqual({
      outcome: 'ACQUIRED',
      status: 'lease-lost',
      during: 'heartbeat',
      fencingToken: firstToken,
      attempt: 1,
      handlerStarted: true,
      handlerCompleted: true,
      result: 'finished after the abort',
      error: undefined,
    });
    expect(events.filter(([n]) => n === 'leaseLost').map(([, p]) => p.during)).toEqual([
      'heartbeat',
      'write',
    ]);
    expect(await store.get(request)).toMatchObject({
      state: 'COMPLETED',
      fencingToken: secondToken,
      result: 'j"b"',
    });
  });

  it.each([
    ['threw', 'release'],
    ['returned', 'complete'],
  ] as const)(
    "a handler that %s while its lease held, whose %s is refused (an operator released the record): lease-lost, during 'write'",
    async (how, _write) => {
      const store = new MemoryIdempotencyStore();
      // No heartbeat is due while the handler runs: only the write after it meets the loss.
      const idempotency = new Idempotency({ store, logger: false }, { leaseMs: 60_000, retentionMs: 60_000 });
      const events = recordEvents(idempotency);
      const result = await idempotency.run(request, async ({ fencingToken }) => {
        await store.release(request, fencingToken, { retentionMs: 60_000 });
        if (how === 'threw') throw new Error('retry me');
        return 'done';
      });
      expect(result).toMatchObject({
        status: 'lease-lost',
        during: 'write',
        handlerStarted: true,
        handlerCompleted: how === 'returned',
      });
      expect(events.filter(([n]) => n === 'leaseLost').map(([, p]) => p.during)).toEqual(['write']);
    },
  );

  // Fake timers: on real timers a claim slower than 100 ms under load left less than a heartbeat interval
  // of the 150 ms lease, so the extension before the handler took the hanging fault, and run rejected with
  // its StoreUnavailableError after 1 s.
  it('the signal aborts at the local deadline when no extension succeeds, even while one hangs', async () => {
    await onFakeClock(async () => {
      const store = new FaultyStore(new MemoryIdempotencyStore({ now: () => Date.now() }));
      store.inject('extend', { kind: 'hangThenThrow', ms: 1_000, error: unavailable });
      const idempotency = new Idempotency({ store }, { leaseMs: 150, retentionMs: 60_000 });
      const events = recordEvents(idempotency);
      const started = performance.now();
      let abortedAfterMs = Number.NaN;
      const run = idempotency.run(request, ({ signal }) => {
        return new Promise<string>((resolve) =>
          signal.addEventListener('abort', () => {
            abortedAfterMs = performance.now() - started;
            resolve('stopped');
          }),
        );
      });
      // The lease is 150 ms; the extension sent at 50 ms hangs until 1050 ms.
      await jest.advanceTimersByTimeAsync(149);
      expect(abortedAfterMs).toBeNaN();
      await jest.advanceTimersByTimeAsync(1);
      expect(abortedAfterMs).toBe(150);
      expect(events.filter(([n]) => n === 'leaseLost').map(([, p]) => p.during)).toEqual(['local-deadline']);
      await jest.advanceTimersByTimeAsync(1_000); // the write waits for the hanging extension
      // Nobody else claimed, so the fenced complete still succeeds: the operation is recorded once.
      expect(await run).toMatchObject({ status: 'completed', result: 'stopped', recorded: true });
    });
  });

  it("no extension reached the store for a whole lease, and another worker claimed the key before the handler returned: lease-lost, during 'local-deadline'", async () => {
    let offset = 0;
    const inner = new MemoryIdempotencyStore({ now: () => Date.now() + offset });
    const store = new FaultyStore(inner);
    store.breakAlways('extend', unavailable);
    const idempotency = new Idempotency({ store, logger: false }, { leaseMs: 150, retentionMs: 60_000 });
    const rival = new Idempotency({ store: inner, logger: false }, { leaseMs: 150, retentionMs: 60_000 });
    const events = recordEvents(idempotency);
    const result = await idempotency.run(request, async ({ signal }) => {
      await new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }));
      offset += 1_000; // the lease lapsed on the store's clock too
      expect(await rival.claim(request)).toMatchObject({ outcome: 'ACQUIRED_STALE' });
      return 'finished after the abort';
    });
    expect(result).toMatchObject({ status: 'lease-lost', during: 'local-deadline', handlerCompleted: true });
    expect(events.filter(([n]) => n === 'leaseLost').map(([, p]) => p.during)).toEqual([
      'local-deadline',
      'write',
    ]);
  });

  // Fake timers here: a 150 ms lease beats every 50 ms, so after one refused beat the next has 50 ms to
  // reach the store. On a loaded machine a timer ran that much late, no extension reached the store within
  // the lease, the lease really lapsed, and the keeper rightly aborted the signal (result: true).
  it('heartbeats that fail now and then (store blips) do not lose the lease', async () => {
    await onFakeClock(async () => {
      const store = new FaultyStore(new MemoryIdempotencyStore({ now: () => Date.now() }));
      store.inject('extend', { kind: 'throw', error: unavailable }, 1);
      const idempotency = new Idempotency({ store }, { leaseMs: 150, retentionMs: 60_000 });
      const events = recordEvents(idempotency);
      const run = idempotency.run(request, async ({ signal }) => {
        await sleep(400);
        return signal.aborted;
      });
      await jest.advanceTimersByTimeAsync(400);
      expect(await run).toMatchObject({ status: 'completed', result: false });
      expect(events.filter(([n]) => n === 'storeError')).toEqual([
        [
          'storeError',
          expect.objectContaining({ operation: 'extend', error: expect.any(StoreUnavailableError) }),
        ],
      ]);
      expect(events.filter(([n]) => n === 'leaseLost')).toEqual([]);
      expect(store.calls.extend).toBeGreaterThanOrEqual(5);
    });
  });

  // Fake timers: a 100 ms lease beats every 33 ms; on a loaded machine late timers left room for only two
  // beats in 300 ms.
  it('an onHeartbeat callback that throws is reported as storeError and does not stop the heartbeat', async () => {
    await onFakeClock(async () => {
      const idempotency = new Idempotency(
        { store: new MemoryIdempotencyStore({ now: () => Date.now() }) },
        { leaseMs: 100 },
      );
      const events = recordEvents(idempotency);
      let beats = 0;
      const run = idempotency.run(request, () => sleep(300).then(() => 'ok'), {
        onHeartbeat: () => {
          beats++;
          throw new Error('broker heartbeat failed');
        },
      });
      await jest.advanceTimersByTimeAsync(300);
      expect(await run).toMatchObject({ status: 'completed' });
      expect(beats).toBeGreaterThanOrEqual(3);
      expect(events.filter(([n, p]) => n === 'storeError' && p.operation === 'onHeartbeat')).toHaveLength(
        beats,
      );
      expect(events.filter(([n]) => n === 'leaseLost')).toEqual([]);
    });
  });

  it('after the local deadline declared the claim lost, no heartbeat is sent and none is reported', async () => {
    await onFakeClock(async () => {
      const store = new FaultyStore(new MemoryIdempotencyStore({ now: () => Date.now() }));
      // The beats at 50 and 100 ms fail at once; the store answers again from then on.
      store.inject('extend', { kind: 'throw', error: unavailable }, 2);
      const extend = jest.spyOn(store, 'extend');
      const idempotency = new Idempotency({ store, logger: false }, { leaseMs: 150, retentionMs: 60_000 });
      const events = recordEvents(idempotency);
      const order: string[] = [];
      idempotency.on('leaseLost', ({ during }) => order.push(`leaseLost ${during}`));
      // The handler does not stop at its signal: it returns at 300 ms.
      const run = idempotency.run(request, () => sleep(300).then(() => 'late'), {
        onHeartbeat: () => void order.push('heartbeat'),
      });
      await jest.advanceTimersByTimeAsync(400);
      await run;
      expect(order).toEqual(['leaseLost local-deadline']);
      // Two failed beats, none after the loss: a beat then could renew a claim the run gave up on, and an
      // adapter's onHeartbeat would extend the broker's timer (an SQS visibility timeout) for it.
      expect(extend).toHaveBeenCalledTimes(2);
      expect(events.filter(([n]) => n === 'leaseLost')).toHaveLength(1);
    });
  });

  it('leaves no timer pending after run settles (completed, threw, lease lost)', async () => {
    // Node marks a Timeout `_destroyed` once it fired or was cleared; unref'd timers are not in
    // process.getActiveResourcesInfo(), so every timer created during the runs is tracked instead.
    const created: NodeJS.Timeout[] = [];
    const original = global.setTimeout;
    const spy = jest.spyOn(global, 'setTimeout').mockImplementation(((
      ...args: Parameters<typeof setTimeout>
    ) => {
      const t = original(...args);
      created.push(t);
      return t;
    }) as typeof setTimeout);
    try {
      let offset = 0;
      const store = new MemoryIdempotencyStore({ now: () => Date.now() + offset });
      const idempotency = new Idempotency({ store }, { leaseMs: 60, retentionMs: 60_000 });
      await idempotency.run({ scope: 't', key: '1' }, () => sleep(100));
      await idempotency.run({ scope: 't', key: '2' }, () => Promise.reject(new Error('x')));
      const lost = idempotency.run(
        { scope: 't', key: '3' },
        ({ signal }) => new Promise((r) => signal.addEventListener('abort', r)),
      );
      await sleep(5);
      offset += 1_000;
      await idempotency.claim({ scope: 't', key: '3' });
      expect(await lost).toMatchObject({ status: 'lease-lost' });
    } finally {
      spy.mockRestore();
    }
    expect(created.length).toBeGreaterThan(4);
    const pending = created.filter((t) => !(t as unknown as { _destroyed: boolean })._destroyed);
    expect(pending).toHaveLength(0);
  });

  // Fake timers: the extension is in flight (applied, its reply 30 ms away) when the handler returns. On
  // real timers a claim slower than 60 ms under load left less than a heartbeat interval of the 90 ms lease,
  // so the extension before the handler took the injected fault and run rejected (StoreUnavailableError).
  it('a heartbeat in flight when the handler returns is awaited before the record is written', async () => {
    await onFakeClock(async () => {
      const order: string[] = [];
      class SlowFailingExtend extends FaultyStore {
        override async extend(...args: Parameters<FaultyStore['extend']>): ReturnType<FaultyStore['extend']> {
          await this.inner.extend(...args); // applied; the reply is lost after 30 ms
          order.push('extend sent');
          await sleep(30);
          order.push('extend failed');
          throw unavailable();
        }
        override async complete(
          ...args: Parameters<FaultyStore['complete']>
        ): ReturnType<FaultyStore['complete']> {
          order.push('complete');
          return super.complete(...args);
        }
      }
      const store = new SlowFailingExtend(new MemoryIdempotencyStore({ now: () => Date.now() }));
      const idempotency = new Idempotency({ store }, { leaseMs: 90, retentionMs: 60_000 });
      const run = idempotency.run(request, () => sleep(45).then(() => 1)); // the beat: at 30 ms, until 60 ms
      await jest.advanceTimersByTimeAsync(60);
      expect(await run).toMatchObject({ status: 'completed', recorded: true });
      expect(order).toEqual(['extend sent', 'extend failed', 'complete']);
      expect(await store.get(request)).toMatchObject({ state: 'COMPLETED' });
    });
  });
});
