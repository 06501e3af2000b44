import { once } from 'node:events';
import {
  Idempotency,
  type IdempotencyOptions,
  MemoryIdempotencyStore,
  ReplicationTimeoutError,
  StoreUnavailableError,
  UnexpectedReplyError,
} from '../src';
import { StoreGate } from '../src/kit';
import { giveBackUnrun } from '../src/kit/give-back';
import { FaultyStore, type Operation, recordEvents } from './support/faulty-store';

const request = { scope: 'faults', key: 'k' };
const unavailable = () => new StoreUnavailableError('Redis did not answer within 2000 ms');

function setup(options: IdempotencyOptions = {}) {
  const store = new FaultyStore(new MemoryIdempotencyStore());
  const idempotency = new Idempotency({ store }, { leaseMs: 10_000, retentionMs: 60_000, ...options });
  return { store, idempotency, events: recordEvents(idempotency) };
}

describe('Idempotency runner: store outages', () => {
  it('fails closed by default: a claim the store did not answer rejects with a retryable typed error', async () => {
    const { store, idempotency, events } = setup();
    store.inject('claim', { kind: 'throw', error: unavailable });
    const handler = jest.fn();
    const error = await idempotency.run(request, handler).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(StoreUnavailableError);
    expect(error).toMatchObject({
      code: 'STORE_UNAVAILABLE',
      retryable: true,
      name: 'StoreUnavailableError',
    });
    expect(handler).not.toHaveBeenCalled();
    expect(events).toEqual([
      ['storeError', { operation: 'claim', error, subject: { scope: 'faults', key: 'k' } }],
    ]);
  });

  it('fails open only by option: the handler runs unprotected and failOpen is emitted', async () => {
    const { store, idempotency, events } = setup({ storeFailureMode: 'open' });
    store.inject('claim', { kind: 'throw', error: unavailable }, 2);
    const ok = await idempotency.run(request, (ctx) => ({ token: ctx.fencingToken, attempt: ctx.attempt }));
    expect(ok).toEqual({
      outcome: 'UNPROTECTED',
      status: 'completed',
      result: { token: 0, attempt: 0 },
      storeError: expect.any(StoreUnavailableError),
    });
    const boom = new Error('boom');
    expect(
      await idempotency.run(request, () => {
        throw boom;
      }),
    ).toEqual({
      outcome: 'UNPROTECTED',
      status: 'threw',
      error: boom,
      storeError: expect.any(StoreUnavailableError),
    });
    expect(events.map(([n]) => n)).toEqual(['storeError', 'failOpen', 'storeError', 'failOpen']);
    expect(events[1]![1]).toMatchObject({
      scope: 'faults',
      key: 'k',
      error: expect.any(StoreUnavailableError),
    });
  });

  describe('fail-open after a claim was written (waitForReplicas: its WAIT or start went unanswered)', () => {
    /**
     * A store whose claims are applied as reservations (as `RedisIdempotencyStore` with `waitForReplicas`
     * makes them), then, `failing` times, rejected as unanswered naming the claim (`writtenClaim`).
     */
    function writtenThenUnanswered(
      failing: number,
      clock = { ms: 1_700_000_000_000 },
      { counted = false }: { counted?: boolean } = {},
    ) {
      const inner = new MemoryIdempotencyStore({ now: () => clock.ms });
      const store = new FaultyStore(inner);
      const claim = store.claim.bind(store);
      let left = failing;
      store.claim = async (id, options) => {
        if (left <= 0) return claim(id, options);
        left--;
        // counted: the claim was started (its attempt counted) and only the start's reply was lost.
        const reply = await inner.claim(id, { ...options, reserve: !counted });
        if (reply.outcome !== 'ACQUIRED' && reply.outcome !== 'ACQUIRED_STALE') return reply;
        throw new StoreUnavailableError('Redis is unavailable: Connection is closed.', {
          writtenClaim: { fencingToken: reply.fencingToken, outcome: reply.outcome },
        });
      };
      return { store, clock };
    }

    it('releases the written claim abandoned after the unprotected handler: the next claim is ACQUIRED_STALE (was ACQUIRED once its lease lapsed)', async () => {
      const { store, clock } = writtenThenUnanswered(1);
      const idempotency = new Idempotency(
        { store, logger: false },
        { leaseMs: 10_000, retentionMs: 60_000, storeFailureMode: 'open' },
      );
      const events = recordEvents(idempotency);
      const r = await idempotency.run(request, ({ outcome }) => outcome);
      expect(r).toMatchObject({ outcome: 'UNPROTECTED', status: 'completed', result: 'UNPROTECTED' });
      expect(await store.inner.get(request)).toMatchObject({ state: 'RELEASED', abandoned: true });
      clock.ms += 20_000; // past the written claim's lease either way
      const next = await idempotency.run(request, ({ outcome }) => outcome);
      expect(next).toMatchObject({ outcome: 'ACQUIRED_STALE', result: 'ACQUIRED_STALE' });
      expect(events.map(([n]) => n)).toEqual(['storeError', 'failOpen', 'outcome', 'completed']);
    });

    it('a fail-open result and its failOpen event name no written claim (its handler ran: it must never be given back unrun), even when the abandoned release goes unanswered', async () => {
      const open = writtenThenUnanswered(1);
      open.store.inject('release', { kind: 'throw', error: unavailable });
      const idempotency = new Idempotency(
        { store: open.store, logger: false },
        { leaseMs: 10_000, retentionMs: 60_000, storeFailureMode: 'open' },
      );
      const failOpen: unknown[] = [];
      idempotency.on('failOpen', ({ error }) => failOpen.push(error));
      const r = await idempotency.run(request, ({ outcome }) => outcome);
      expect(r).toMatchObject({ outcome: 'UNPROTECTED', status: 'completed' });
      const reported = (r as { storeError: StoreUnavailableError }).storeError;
      expect(reported).toBeInstanceOf(StoreUnavailableError);
      expect(reported.writtenClaim).toBeUndefined();
      expect(failOpen).toHaveLength(1);
      expect((failOpen[0] as StoreUnavailableError).writtenClaim).toBeUndefined();
      // The claim stays as the handler left it: in progress, its attempt spent, to lapse as ACQUIRED_STALE.
      expect(await open.store.inner.get(request)).toMatchObject({ state: 'IN_PROGRESS' });
    });

    it('release and giveBackUnrun refuse at compile time what is not a claim to give back: a run result carries a fencing token and an outcome, but its handler ran', async () => {
      const runner = new Idempotency({ store: new MemoryIdempotencyStore(), logger: false });
      const ran = await runner.run(request, () => 1);
      // @ts-expect-error a run's result is not a claim nobody ran
      const toRelease: Parameters<Idempotency['release']>[1] = ran;
      // @ts-expect-error the same for the kit's give-back
      const toGiveBack: Parameters<typeof giveBackUnrun>[2] = ran;
      expect([toRelease, toGiveBack]).toEqual([ran, ran]);
      // What a failed call names can be given back; it is marked as such.
      const error = new StoreUnavailableError('down', { writtenClaim: { fencingToken: 7 } });
      const written: Parameters<Idempotency['release']>[1] = error.writtenClaim!;
      expect(written).toEqual({ kind: 'written-claim', fencingToken: 7 });
    });

    it('a handler that threw is released abandoned too', async () => {
      const open = writtenThenUnanswered(1);
      const boom = new Error('boom');
      const r = await new Idempotency(
        { store: open.store, logger: false },
        { leaseMs: 10_000, storeFailureMode: 'open' },
      ).run(request, () => {
        throw boom;
      });
      expect(r).toMatchObject({ outcome: 'UNPROTECTED', status: 'threw', error: boom });
      expect(await open.store.inner.get(request)).toMatchObject({ state: 'RELEASED', abandoned: true });
    });

    it.each([
      ['a reservation (its WAIT unanswered)', false],
      ['a counted claim (its start applied, the reply lost)', true],
    ])(
      "fail-closed gives back %s unrun before run and claim reject, naming no written claim: the next claim is ACQUIRED at once, attempt 1 (it was left IN_PROGRESS until its lease lapsed, then a counted claim's next was ACQUIRED_STALE, attempt 2)",
      async (_what, counted) => {
        for (const call of ['run', 'claim'] as const) {
          const closed = writtenThenUnanswered(1, undefined, { counted });
          const idempotency = new Idempotency({ store: closed.store, logger: false }, { leaseMs: 10_000 });
          const handler = jest.fn();
          const error = await (call === 'run'
            ? idempotency.run(request, handler)
            : idempotency.claim(request)
          ).catch((e: unknown) => e);
          expect(error).toBeInstanceOf(StoreUnavailableError);
          expect((error as StoreUnavailableError).writtenClaim).toBeUndefined();
          expect(handler).not.toHaveBeenCalled();
          expect(await closed.store.inner.get(request)).toMatchObject({ state: 'RELEASED', attempt: 0 });
          closed.clock.ms += 1;
          const next = await idempotency.run(request, ({ outcome, attempt }) => ({ outcome, attempt }));
          expect(next).toMatchObject({ status: 'completed', result: { outcome: 'ACQUIRED', attempt: 1 } });
        }
      },
    );

    it('fail-closed gives back a written claim that was ACQUIRED_STALE abandoned: the next claim is ACQUIRED_STALE again, as the attempt after the lapsed one', async () => {
      for (const counted of [false, true]) {
        const clock = { ms: 1_700_000_000_000 };
        // A handler started (attempt 1) and its lease lapsed; then a claim took the key (ACQUIRED_STALE) and
        // its reply was lost.
        const { store } = writtenThenUnanswered(1, clock, { counted });
        await store.inner.claim(request, { leaseMs: 10_000, retentionMs: 60_000 });
        clock.ms += 20_000;
        const runner = new Idempotency({ store, logger: false }, { leaseMs: 10_000 });
        await expect(runner.run(request, jest.fn())).rejects.toBeInstanceOf(StoreUnavailableError);
        expect(await store.inner.get(request)).toMatchObject({
          state: 'RELEASED',
          attempt: 1,
          abandoned: true,
        });
        const next = await runner.run(request, ({ outcome, attempt }) => ({ outcome, attempt }));
        expect(next).toMatchObject({ result: { outcome: 'ACQUIRED_STALE', attempt: 2 } });
      }
    });

    it('a claim written by a conflict wait that then failed is given back unrun: run resolves the CONFLICT it had, waitForOutcome rejects naming none, the record stays stale (it was left IN_PROGRESS until its lease lapsed)', async () => {
      for (const call of ['run', 'waitForOutcome'] as const) {
        const clock = { ms: 1_700_000_000_000 };
        const { store } = writtenThenUnanswered(0, clock);
        // Another worker's handler holds the key; the wait ends with a claim of the key once its lease
        // lapsed, written, and then not answered.
        await store.inner.claim(request, { leaseMs: 10_000, retentionMs: 60_000 });
        store.waitForOutcome = async (id, options) => {
          clock.ms += 20_000;
          const reply = await store.inner.claim(id, options);
          expect(reply.outcome).toBe('ACQUIRED_STALE');
          throw new StoreUnavailableError('Redis is unavailable: Connection is closed.', {
            writtenClaim: { fencingToken: reply.fencingToken, outcome: reply.outcome as 'ACQUIRED_STALE' },
          });
        };
        const idempotency = new Idempotency(
          { store, logger: false },
          { leaseMs: 10_000, retentionMs: 60_000, conflictWaitMs: 1000 },
        );
        const handler = jest.fn();
        if (call === 'run') {
          expect(await idempotency.run(request, handler)).toMatchObject({ outcome: 'CONFLICT' });
        } else {
          const error = await idempotency.waitForOutcome(request, { reserve: true }).catch((e: unknown) => e);
          expect(error).toBeInstanceOf(StoreUnavailableError);
          expect((error as StoreUnavailableError).writtenClaim).toBeUndefined();
        }
        expect(handler).not.toHaveBeenCalled();
        expect(await store.inner.get(request)).toMatchObject({
          state: 'RELEASED',
          attempt: 1,
          abandoned: true,
        });
      }
    });

    it.each(['closed', 'open'] as const)(
      'storeFailureMode %s: the holder releases during a conflict wait, the claim the wait then wrote goes unanswered and so does its give-back: run rejects naming it, nothing runs, no failOpen (it resolved the CONFLICT it had, and the claim held the key until its lease lapsed)',
      async (storeFailureMode) => {
        const inner = new MemoryIdempotencyStore();
        const store = new FaultyStore(inner);
        const runner = { leaseMs: 10_000, retentionMs: 60_000 };
        const holder = new Idempotency({ store, logger: false }, runner);
        const waiter = new Idempotency(
          { store, logger: false },
          { ...runner, conflictWaitMs: 5_000, storeFailureMode },
        );
        const events = recordEvents(waiter);
        // The holder's handler runs until it is told to give up (a retryable error: its claim is released).
        let giveUp!: () => void;
        const holding = holder.run(
          request,
          () =>
            new Promise((_, reject) => {
              giveUp = () => reject(new Error('transient'));
            }),
        );
        await once(holder, 'outcome');
        // From now on, a claim that takes the key is written as a reservation, then its WAIT goes unanswered
        // (RedisIdempotencyStore with waitForReplicas), and the store does not answer the give-back either.
        const claim = inner.claim.bind(inner);
        inner.claim = async (id, options) => {
          const reply = await claim(id, { ...options, reserve: true });
          if (reply.outcome !== 'ACQUIRED' && reply.outcome !== 'ACQUIRED_STALE') return reply;
          store.inject('release', { kind: 'throw', error: unavailable });
          throw new StoreUnavailableError('Redis is unavailable: Connection is closed.', {
            writtenClaim: { fencingToken: reply.fencingToken, outcome: reply.outcome },
          });
        };
        const handler = jest.fn();
        const waiting = waiter.run(request, handler).catch((e: unknown) => e);
        const [conflict] = await once(waiter, 'outcome');
        expect(conflict).toMatchObject({ outcome: 'CONFLICT' });
        giveUp();
        expect(await holding).toMatchObject({ status: 'released', attempt: 1 });

        const error = await waiting;
        expect(error).toBeInstanceOf(StoreUnavailableError);
        const record = await inner.get(request);
        expect(record).toMatchObject({ state: 'IN_PROGRESS', reserved: true, attempt: 1 });
        expect((error as StoreUnavailableError).writtenClaim).toEqual({
          kind: 'written-claim',
          fencingToken: record!.fencingToken,
          outcome: 'ACQUIRED',
        });
        expect(handler).not.toHaveBeenCalled();
        expect(events.map(([n, p]) => (p.operation ? `${n}:${p.operation}` : n))).toEqual([
          'outcome',
          'storeError:waitForOutcome',
          'storeError:release',
        ]);
        // The caller gives it back (as the adapters do, through the kit's giveBackUnrun): no attempt spent.
        inner.claim = claim;
        expect(await waiter.release(request, (error as StoreUnavailableError).writtenClaim!)).toBe(true);
        expect(await waiter.run(request, ({ outcome, attempt }) => ({ outcome, attempt }))).toMatchObject({
          status: 'completed',
          result: { outcome: 'ACQUIRED', attempt: 2 },
        });
      },
    );

    it('fail-closed: a give-back the store does not answer leaves the error naming the claim; one its replicas did not acknowledge was applied, and the error names none', async () => {
      const down = writtenThenUnanswered(1);
      down.store.inject('release', { kind: 'throw', error: unavailable });
      const runner = new Idempotency({ store: down.store, logger: false }, { leaseMs: 10_000 });
      const kept = await runner.claim(request).catch((e: unknown) => e);
      expect(kept).toMatchObject({
        code: 'STORE_UNAVAILABLE',
        writtenClaim: { fencingToken: (await down.store.inner.get(request))!.fencingToken },
      });
      expect(await down.store.inner.get(request)).toMatchObject({ state: 'IN_PROGRESS' });

      const unacknowledged = writtenThenUnanswered(1);
      unacknowledged.store.inject('release', {
        kind: 'applyThenThrow',
        error: () => new ReplicationTimeoutError('not acknowledged', { requiredReplicas: 1 }),
      });
      const other = new Idempotency({ store: unacknowledged.store, logger: false }, { leaseMs: 10_000 });
      const error = await other.claim(request).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(StoreUnavailableError);
      expect((error as StoreUnavailableError).writtenClaim).toBeUndefined();
      expect(await unacknowledged.store.inner.get(request)).toMatchObject({ state: 'RELEASED', attempt: 0 });
    });

    it("a claim the error still names (its give-back unanswered) is given back later with Idempotency.release or the kit's giveBackUnrun: RELEASED, its counted attempt returned", async () => {
      for (const giveBack of ['release', 'giveBackUnrun'] as const) {
        const down = writtenThenUnanswered(1, undefined, { counted: true });
        down.store.inject('release', { kind: 'throw', error: unavailable });
        const runner = new Idempotency({ store: down.store, logger: false }, { leaseMs: 10_000 });
        const error = await runner.claim(request).catch((e: unknown) => e);
        expect(error).toBeInstanceOf(StoreUnavailableError);
        const written = (error as StoreUnavailableError).writtenClaim!;
        expect(written).toEqual({
          kind: 'written-claim',
          fencingToken: expect.any(Number),
          outcome: 'ACQUIRED',
        });
        expect(await down.store.inner.get(request)).toMatchObject({ state: 'IN_PROGRESS', attempt: 1 });
        if (giveBack === 'release') {
          expect(await runner.release(request, written)).toBe(true);
        } else {
          const gate = new StoreGate(down.store);
          await giveBackUnrun(runner, request, written, { gate });
          gate.dispose();
        }
        expect(await down.store.inner.get(request)).toMatchObject({
          state: 'RELEASED',
          attempt: 0,
          abandoned: false,
        });
        expect(await runner.claim(request)).toMatchObject({ outcome: 'ACQUIRED', attempt: 1 });
      }
    });

    it('a release the store does not answer is a storeError (never a rejection); one refused because another claim took the key is leaseLost', async () => {
      const down = writtenThenUnanswered(1);
      down.store.inject('release', { kind: 'throw', error: unavailable }, 2);
      const idempotency = new Idempotency(
        { store: down.store, logger: false },
        { leaseMs: 10_000, storeFailureMode: 'open', writeAttempts: 2 },
      );
      const events = recordEvents(idempotency);
      await expect(idempotency.run(request, () => 1)).resolves.toMatchObject({ outcome: 'UNPROTECTED' });
      // One try: a fail-open run does not wait through writeAttempts for a store that has just failed.
      expect(events.map(([n, p]) => (p.operation ? `${n}:${p.operation}` : n))).toEqual([
        'storeError:claim',
        'failOpen',
        'storeError:release',
      ]);

      const taken = writtenThenUnanswered(1);
      const runner = new Idempotency(
        { store: taken.store, logger: false },
        { leaseMs: 10_000, storeFailureMode: 'open' },
      );
      const seen = recordEvents(runner);
      let written = 0;
      await runner.run(request, async () => {
        written = (await taken.store.inner.get(request))!.fencingToken;
        // The unprotected handler outlives the written claim's lease, and another worker claims the key.
        taken.clock.ms += 20_000;
        await taken.store.inner.claim(request, { leaseMs: 10_000, retentionMs: 60_000 });
      });
      expect(seen.map(([n]) => n)).toEqual(['storeError', 'failOpen', 'leaseLost']);
      expect(seen[2]![1]).toMatchObject({ ...request, fencingToken: written, during: 'write' });
      expect((await taken.store.inner.get(request))!.fencingToken).toBeGreaterThan(written);
    });
  });

  it('fail-open does not cover a store that answered with nonsense: UnexpectedReplyError still rejects', async () => {
    const { store, idempotency } = setup({ storeFailureMode: 'open' });
    store.inject('claim', { kind: 'throw', error: () => new UnexpectedReplyError('bad reply') });
    const handler = jest.fn();
    await expect(idempotency.run(request, handler)).rejects.toBeInstanceOf(UnexpectedReplyError);
    expect(handler).not.toHaveBeenCalled();
  });

  it('retries a complete while the store is unavailable, then records it', async () => {
    const { store, idempotency, events } = setup();
    store.inject('complete', { kind: 'throw', error: unavailable }, 2);
    const result = await idempotency.run(request, () => 'done');
    expect(result).toMatchObject({ status: 'completed', recorded: true });
    expect(store.calls.complete).toBe(3);
    expect(events.filter(([n]) => n === 'storeError').map(([, p]) => p.operation)).toEqual([
      'complete',
      'complete',
    ]);
    expect(await store.get(request)).toMatchObject({ state: 'COMPLETED', result: 'j"done"' });
  });

  it.each<[Operation, () => unknown, string, string]>([
    ['complete', () => 'value', 'completed', 'COMPLETED'],
    ['release', () => Promise.reject(new Error('retry me')), 'released', 'RELEASED'],
    ['fail', () => Promise.reject(Object.assign(new Error('no'), { retryable: false })), 'failed', 'FAILED'],
  ])(
    'a %s applied by the store whose reply was lost is recognised on retry (not reported as lease lost)',
    async (operation, handler, status, state) => {
      const { store, idempotency, events } = setup();
      store.inject(operation, { kind: 'applyThenThrow', error: unavailable });
      const result = await idempotency.run(request, handler);
      expect(result).toMatchObject({ status, recorded: true });
      expect(store.calls[operation]).toBe(2);
      expect(events.some(([n]) => n === 'leaseLost')).toBe(false);
      expect(await store.get(request)).toMatchObject({
        state,
        fencingToken: (result as { fencingToken: number }).fencingToken,
      });
    },
  );

  it('a complete whose first try reached the store twice (a client resending it after a reconnect) is recorded: COMPLETED under its own token is only ever its own write', async () => {
    class ResendingStore extends MemoryIdempotencyStore {
      override async complete(...args: Parameters<MemoryIdempotencyStore['complete']>) {
        await super.complete(...args); // the first send, applied; its reply never reached the caller
        return super.complete(...args); // the resent one, refused: LEASE_LOST, COMPLETED, our token
      }
    }
    const idempotency = new Idempotency(
      { store: new ResendingStore() },
      { leaseMs: 10_000, retentionMs: 60_000 },
    );
    const events = recordEvents(idempotency);
    const result = await idempotency.run(request, () => 'value');
    expect(result).toMatchObject({ status: 'completed', recorded: true });
    expect(events.some(([n]) => n === 'leaseLost')).toBe(false);
  });

  it('after writeAttempts unanswered tries the result is unrecorded (recorded: false), never a rejection', async () => {
    const { store, idempotency, events } = setup({ writeAttempts: 3 });
    store.breakAlways('complete', unavailable);
    const result = await idempotency.run(request, () => 'side effect done');
    expect(result).toMatchObject({ status: 'completed', result: 'side effect done', recorded: false });
    expect(store.calls.complete).toBe(3);
    expect(events.filter(([n]) => n === 'storeError')).toHaveLength(3);
    expect(events.find(([n]) => n === 'completed')?.[1]).toMatchObject({ recorded: false });
    store.heal();
    expect((await store.get(request))?.state).toBe('IN_PROGRESS');
  });

  it('an unrecorded release reports recorded: false; the lease then expires for the next claim', async () => {
    const { store, idempotency } = setup({ writeAttempts: 2 });
    store.breakAlways('release', unavailable);
    const result = await idempotency.run(request, () => Promise.reject(new Error('transient')));
    expect(result).toMatchObject({ status: 'released', recorded: false });
  });

  it('a write the store refuses as malformed (not unavailable) is not retried and rejects', async () => {
    const { store, idempotency } = setup();
    store.inject('complete', { kind: 'throw', error: () => new UnexpectedReplyError('bad') }, 5);
    await expect(idempotency.run(request, () => 1)).rejects.toBeInstanceOf(UnexpectedReplyError);
    expect(store.calls.complete).toBe(1);
  });

  it('the one extend of a claim whose lease ran out before execute is not answered: StoreUnavailableError, nothing runs, also fail-open', async () => {
    const { store, idempotency } = setup({ leaseMs: 100, storeFailureMode: 'open' });
    const claim = await idempotency.claim(request);
    if (claim.outcome !== 'ACQUIRED') throw new Error(claim.outcome);
    await new Promise((r) => setTimeout(r, 150)); // the claim's lease runs out before execute
    store.breakAlways('extend', unavailable);
    const handler = jest.fn();
    await expect(idempotency.execute(request, claim, handler)).rejects.toBeInstanceOf(StoreUnavailableError);
    expect(handler).not.toHaveBeenCalled(); // not run unprotected: the claim may still be ours
    expect(await store.inner.get(request)).toMatchObject({ state: 'IN_PROGRESS', attempt: 1 });
  });

  it("execute's unanswered start or extension names the claim (writtenClaim): the caller gives it back unrun with giveBackUnrun", async () => {
    const { store, idempotency } = setup({ leaseMs: 100 });
    const claim = await idempotency.claim(request);
    if (claim.outcome !== 'ACQUIRED') throw new Error(claim.outcome);
    await new Promise((r) => setTimeout(r, 150)); // the claim's lease runs out before execute
    store.inject('extend', { kind: 'applyThenThrow', error: unavailable });
    const error = await idempotency.execute(request, claim, jest.fn()).catch((e: unknown) => e);
    expect(error).toMatchObject({
      code: 'STORE_UNAVAILABLE',
      writtenClaim: { kind: 'written-claim', fencingToken: claim.fencingToken, outcome: 'ACQUIRED' },
    });
    await giveBackUnrun(idempotency, request, (error as StoreUnavailableError).writtenClaim);
    expect(await store.inner.get(request)).toMatchObject({ state: 'RELEASED', attempt: 0 });
  });

  it('run gives back a claim whose one extension before its handler went unanswered (it held the key for its lease, an attempt spent)', async () => {
    const { store, idempotency } = setup({ leaseMs: 300 });
    // The claim's reply comes late: less than a heartbeat interval of its lease is left when it arrives.
    const claim = store.claim.bind(store);
    store.claim = async (id, options) => {
      const reply = await claim(id, options);
      await new Promise((r) => setTimeout(r, 250));
      return reply;
    };
    store.inject('extend', { kind: 'applyThenThrow', error: unavailable });
    const handler = jest.fn();
    const error = await idempotency.run(request, handler).catch((e: unknown) => e);
    expect(error).toMatchObject({ code: 'STORE_UNAVAILABLE', writtenClaim: undefined });
    expect(handler).not.toHaveBeenCalled();
    expect(await store.inner.get(request)).toMatchObject({ state: 'RELEASED', attempt: 0 });

    // Its give-back unanswered too: run rejects naming the claim, for the caller to give back.
    const other = { scope: 'faults', key: 'k2' };
    store.inject('extend', { kind: 'throw', error: unavailable });
    store.inject('release', { kind: 'throw', error: unavailable });
    const named = await idempotency.run(other, handler).catch((e: unknown) => e);
    expect(named).toMatchObject({ code: 'STORE_UNAVAILABLE', writtenClaim: { kind: 'written-claim' } });
    expect(await store.inner.get(other)).toMatchObject({ state: 'IN_PROGRESS', attempt: 1 });
  });

  it('claimMany fails closed as a whole: StoreUnavailableError, a storeError event', async () => {
    const { store, idempotency, events } = setup();
    store.inject('claimMany', { kind: 'throw', error: unavailable });
    await expect(idempotency.claimMany([request])).rejects.toMatchObject({ code: 'STORE_UNAVAILABLE' });
    expect(events).toEqual([['storeError', expect.objectContaining({ operation: 'claimMany' })]]);
  });
});
