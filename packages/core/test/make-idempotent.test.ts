import {
  getIdempotencyContext,
  Idempotency,
  IdempotencyConflictError,
  type IdempotencyOptions,
  LeaseLostError,
  MemoryIdempotencyStore,
  makeIdempotent,
  NonRetryableError,
  PayloadMismatchError,
  RecordFailedError,
} from '../src';
import { onFakeClock } from './support/fake-clock';

interface Order {
  id: string;
  amountCents: number;
}

/** A runner on the in-memory store with a fake clock, and a wrapped `charge` that counts its runs. */
function setup(options: IdempotencyOptions = {}) {
  const clock = { ms: 1_700_000_000_000 };
  const store = new MemoryIdempotencyStore({ now: () => clock.ms });
  const idempotency = new Idempotency({ store }, { leaseMs: 10_000, retentionMs: 60_000, ...options });
  const runs: Order[] = [];
  let behaviour: (order: Order) => Promise<{ chargeId: string }> = async (order) => ({
    chargeId: `ch-${order.id}`,
  });
  const charge = makeIdempotent(
    async (order: Order, note?: string) => {
      runs.push(order);
      void note;
      return behaviour(order);
    },
    { idempotency, scope: 'charge', key: (order) => order.id, payload: (order) => ({ ...order }) },
  );
  return {
    clock,
    store,
    charge,
    runs,
    setBehaviour: (b: typeof behaviour) => {
      behaviour = b;
    },
  };
}

const order: Order = { id: 'o-1', amountCents: 4200 };

describe('makeIdempotent (in-memory store)', () => {
  it('runs the function once per key and replays its stored result to later calls', async () => {
    const { charge, runs, store } = setup();
    await expect(charge(order, 'first')).resolves.toEqual({ chargeId: 'ch-o-1' });
    await expect(charge({ ...order }, 'second')).resolves.toEqual({ chargeId: 'ch-o-1' });
    expect(runs).toHaveLength(1);
    expect(await store.get({ scope: 'charge', key: 'o-1' })).toMatchObject({ state: 'COMPLETED' });
    const again = await charge.run(order);
    expect(again).toMatchObject({ outcome: 'DUPLICATE', hasResult: true, result: { chargeId: 'ch-o-1' } });
  });

  it('.run() resolves with the outcome of a first call', async () => {
    const { charge } = setup();
    await expect(charge.run(order)).resolves.toEqual({
      outcome: 'ACQUIRED',
      status: 'completed',
      fencingToken: expect.any(Number), // from the store's clock in µs (see FencingToken)
      attempt: 1,
      result: { chargeId: 'ch-o-1' },
      recorded: true,
      resultOmitted: false,
      durationMs: expect.any(Number),
    });
  });

  it('keeps the signature: parameters and result types are the original ones', async () => {
    const { charge } = setup();
    const typed: (order: Order, note?: string) => Promise<{ chargeId: string }> = charge;
    // @ts-expect-error a number is not an Order
    await expect(charge(42)).rejects.toThrow();
    expect(typeof typed).toBe('function');
  });

  it('rethrows a retryable error after releasing the record, and runs again on the next call', async () => {
    const { charge, runs, setBehaviour, store } = setup();
    const boom = new Error('provider timeout');
    setBehaviour(async () => {
      throw boom;
    });
    await expect(charge(order)).rejects.toBe(boom);
    expect(await store.get({ scope: 'charge', key: 'o-1' })).toMatchObject({ state: 'RELEASED' });
    setBehaviour(async (o) => ({ chargeId: `ch-${o.id}` }));
    await expect(charge(order)).resolves.toEqual({ chargeId: 'ch-o-1' });
    expect(runs).toHaveLength(2);
  });

  it('a non-retryable error fails the record; later calls reject with RecordFailedError without running', async () => {
    const { charge, runs, setBehaviour } = setup();
    const declined = new NonRetryableError('card declined');
    setBehaviour(async () => {
      throw declined;
    });
    await expect(charge(order)).rejects.toBe(declined);
    const later = charge(order);
    await expect(later).rejects.toBeInstanceOf(RecordFailedError);
    await expect(later).rejects.toMatchObject({
      code: 'RECORD_FAILED',
      retryable: false,
      recordedError: 'NonRetryableError [NON_RETRYABLE]: card declined',
    });
    expect(runs).toHaveLength(1);
  });

  it('a concurrent call with the same key rejects with IdempotencyConflictError carrying retryAfterMs', async () => {
    const { charge, runs, setBehaviour } = setup();
    let finish!: () => void;
    setBehaviour(
      (o) =>
        new Promise((resolve) => {
          finish = () => resolve({ chargeId: `ch-${o.id}` });
        }),
    );
    const first = charge(order);
    while (runs.length === 0) await new Promise((r) => setImmediate(r));
    const second = charge(order);
    await expect(second).rejects.toBeInstanceOf(IdempotencyConflictError);
    await expect(second).rejects.toMatchObject({
      code: 'IDEMPOTENCY_CONFLICT',
      retryable: true,
      retryAfterMs: 10_000,
    });
    finish();
    await expect(first).resolves.toEqual({ chargeId: 'ch-o-1' });
    expect(runs).toHaveLength(1);
  });

  it('the same key with other arguments rejects with PayloadMismatchError without running', async () => {
    const { charge, runs } = setup();
    await charge(order);
    await expect(charge({ ...order, amountCents: 1 })).rejects.toMatchObject({
      name: 'PayloadMismatchError',
      code: 'PAYLOAD_MISMATCH',
    });
    await expect(charge({ ...order, amountCents: 1 })).rejects.toBeInstanceOf(PayloadMismatchError);
    expect(runs).toHaveLength(1);
  });

  it('a lost lease rejects with LeaseLostError and records nothing', async () => {
    const { charge, clock, setBehaviour, store } = setup();
    setBehaviour(async (o) => {
      clock.ms += 20_000; // the lease (10 s) lapses...
      await store.claim({ scope: 'charge', key: o.id }, { leaseMs: 10_000, retentionMs: 60_000 }); // ...and is taken
      return { chargeId: 'late' };
    });
    const call = charge(order);
    await expect(call).rejects.toBeInstanceOf(LeaseLostError);
    const taken = await store.get({ scope: 'charge', key: 'o-1' });
    expect(taken).toMatchObject({ state: 'IN_PROGRESS', attempt: 2 }); // the taker's claim, not the late one's
  });

  it('a claim lost before the function started rejects with LeaseLostError that says it never ran', async () => {
    await onFakeClock(async () => {
      class SlowClaimLostLease extends MemoryIdempotencyStore {
        override async claim(...args: Parameters<MemoryIdempotencyStore['claim']>) {
          const reply = await super.claim(...args);
          await new Promise((r) => setTimeout(r, 250)); // applied; its reply takes 250 ms of a 300 ms lease
          return reply;
        }
        override async extend(...[id, token, options]: Parameters<MemoryIdempotencyStore['extend']>) {
          return super.extend(id, token + 1, options); // refused: the claim was taken meanwhile
        }
      }
      const store = new SlowClaimLostLease({ now: () => Date.now() });
      const idempotency = new Idempotency({ store, logger: false }, { leaseMs: 300, retentionMs: 60_000 });
      let runs = 0;
      const charge = makeIdempotent(
        async (_o: Order) => {
          runs++;
          return 'charged';
        },
        { idempotency, scope: 'charge', key: (o) => o.id },
      );
      const call = charge(order).catch((error: unknown) => error);
      await jest.advanceTimersByTimeAsync(300);
      const error = await call;
      expect(error).toBeInstanceOf(LeaseLostError);
      expect(runs).toBe(0);
      expect(String((error as Error).message)).toMatch(/before the function started/);
    });
  });

  it('exposes the claim inside the call through getIdempotencyContext, and passes `this`', async () => {
    const store = new MemoryIdempotencyStore();
    const idempotency = new Idempotency({ store });
    const service = {
      prefix: 'svc',
      send: makeIdempotent(
        async function (this: { prefix: string }, id: string) {
          const context = getIdempotencyContext();
          return `${this.prefix}:${id}:${context?.fencingToken}:${context?.attempt}:${context?.outcome}`;
        },
        { idempotency, scope: 'send', key: (id) => id },
      ),
    };
    await expect(service.send('m-1')).resolves.toMatch(/^svc:m-1:\d{16}:1:ACQUIRED$/);
    expect(getIdempotencyContext()).toBeUndefined();
  });

  it('a key function that returns an empty key rejects with InvalidKeyError', async () => {
    const idempotency = new Idempotency({ store: new MemoryIdempotencyStore() });
    const fn = makeIdempotent(async (id: string) => id, { idempotency, scope: 's', key: (id) => id });
    await expect(fn('')).rejects.toMatchObject({ code: 'INVALID_IDEMPOTENCY_KEY' });
  });
});
