import { EventEmitter } from 'node:events';
import {
  Idempotency,
  InvalidOptionError,
  MemoryIdempotencyStore,
  NonRetryableError,
  StoreUnavailableError,
} from '@idempotent-consumer/core';
import { DEAD_LETTER_FIELDS } from '@idempotent-consumer/core/kit';
import type { Job } from 'bullmq';
import {
  type BullMqHandlerContext,
  type BullMqIdempotencyEvents,
  type BullMqIdempotencyOptions,
  idempotentProcessor,
  readDeadLetter,
} from '../src';

/** A job as BullMQ hands it to a processor, with `moveToDelayed` recorded. */
function fakeJob(id: string | undefined, data: unknown = { amount: 1 }, opts: { attempts?: number } = {}) {
  const delays: number[] = [];
  const job = {
    id,
    data,
    opts,
    name: 'charge',
    queueName: 'pay',
    queueQualifiedName: 'bull:pay',
    attemptsMade: 0,
    delays,
    moveToDelayed: jest.fn(async (timestamp: number) => {
      delays.push(timestamp - Date.now());
    }),
  };
  return job as typeof job & Job;
}

/** What a processor needs of a worker: pause, resume, its lock duration and its `closing` event. */
class FakeWorker extends EventEmitter {
  paused = false;
  readonly calls: string[] = [];
  constructor(readonly opts: { lockDuration?: number } = {}) {
    super();
  }
  async pause(): Promise<void> {
    this.paused = true;
    this.calls.push('pause');
  }
  async resume(): Promise<void> {
    this.paused = false;
    this.calls.push('resume');
  }
  isPaused(): boolean {
    return this.paused;
  }
}

type Handler = (context: BullMqHandlerContext) => unknown;

function setup(options: BullMqIdempotencyOptions = {}, handler?: Handler) {
  const store = new MemoryIdempotencyStore();
  const idempotency = new Idempotency({ store, logger: false }, { leaseMs: 1000, maxAttempts: 2 });
  const runs: string[] = [];
  let run: Handler = (context) => ({ charged: context.key });
  const processor = idempotentProcessor(
    { idempotency, logger: false },
    { conflictWaitMs: 0, storeProbeBackoff: { baseMs: 5, maxMs: 5, jitter: 'none' }, ...options },
    (context) => {
      runs.push(`${context.key}#${context.attempt} ${context.outcome}`);
      return (handler ?? run)(context);
    },
  );
  const events: { type: keyof BullMqIdempotencyEvents; [field: string]: unknown }[] = [];
  const names = ['settled', 'retryScheduled', 'deadLettered', 'missingKey', 'invalidKey'] as const;
  for (const type of names) processor.events.on(type, (payload: object) => events.push({ type, ...payload }));
  const decisions = () => events.filter((e) => e.type === 'settled').map((e) => e.decision);
  return {
    store,
    idempotency,
    processor,
    runs,
    events,
    decisions,
    handle: (h: Handler) => {
      run = h;
    },
  };
}

/** The error a processor call threw. */
async function thrown(call: Promise<unknown>): Promise<Error> {
  try {
    await call;
  } catch (error) {
    return error as Error;
  }
  throw new Error('the processor returned');
}

describe('idempotentProcessor', () => {
  it('runs a key once: the handler gets the job and token, and a duplicate returns the stored result', async () => {
    const t = setup();
    let context: BullMqHandlerContext | undefined;
    t.handle((c) => {
      context = c;
      return { charged: c.job.data };
    });
    const first = fakeJob('pay-1');
    expect(await t.processor(first, 'token-1')).toEqual({ charged: { amount: 1 } });
    expect(context).toMatchObject({
      key: 'pay-1',
      scope: 'pay',
      outcome: 'ACQUIRED',
      attempt: 1,
      token: 'token-1',
    });
    expect(context?.job).toBe(first);
    expect(await t.processor(fakeJob('pay-1'), 'token-2')).toEqual({ charged: { amount: 1 } });
    expect(t.runs).toEqual(['pay-1#1 ACQUIRED']);
    expect(t.decisions()).toEqual([
      { action: 'complete', reason: 'completed' },
      { action: 'complete', reason: 'duplicate' },
    ]);
    expect(t.events[0]).toMatchObject({
      scope: 'pay',
      key: 'pay-1',
      source: { queue: 'pay', jobId: 'pay-1', attemptsMade: 0 },
    });
  });

  it('a CONFLICT moves the job to delayed for the remaining lease, capped, and throws a DelayedError', async () => {
    const t = setup({ maxConflictDelayMs: 300 });
    let release!: () => void;
    t.handle(() => new Promise<void>((resolve) => (release = resolve)));
    const running = t.processor(fakeJob('pay-1'));
    await new Promise((r) => setImmediate(r));
    const second = fakeJob('pay-1');
    const error = await thrown(t.processor(second));
    expect(error.name).toBe('DelayedError');
    expect(second.moveToDelayed).toHaveBeenCalledTimes(1);
    expect(second.delays[0]).toBeGreaterThan(200);
    expect(second.delays[0]).toBeLessThanOrEqual(300);
    expect(t.events.find((e) => e.type === 'retryScheduled')).toMatchObject({
      reason: 'conflict',
      delayMs: 300,
    });
    release();
    await running;
    expect(t.runs).toHaveLength(1);
  });

  it('within conflictWaitMs, a duplicate delivered while its original runs returns once the original completes', async () => {
    const t = setup({ conflictWaitMs: 2000 });
    let release!: () => void;
    t.handle(() => new Promise((resolve) => (release = () => resolve('done'))));
    const running = t.processor(fakeJob('pay-1'));
    await new Promise((r) => setImmediate(r));
    const second = fakeJob('pay-1');
    const waiting = t.processor(second);
    setTimeout(() => release(), 50);
    expect(await waiting).toBe('done');
    expect(await running).toBe('done');
    expect(second.moveToDelayed).not.toHaveBeenCalled();
    expect(t.runs).toHaveLength(1);
  });

  it('a handler error is rethrown after the record is released; retryScheduled only while BullMQ has attempts left', async () => {
    const t = setup();
    const boom = new Error('gateway timeout');
    t.handle(() => {
      throw boom;
    });
    const job = fakeJob('pay-1', {}, { attempts: 3 });
    expect(await thrown(t.processor(job))).toBe(boom);
    expect(await t.store.get({ scope: 'pay', key: 'pay-1' })).toMatchObject({
      state: 'RELEASED',
      attempt: 1,
    });
    expect(t.events.filter((e) => e.type === 'retryScheduled')).toEqual([
      expect.objectContaining({ reason: 'handler-error', delayMs: undefined, error: boom }),
    ]);
    // BullMQ's last attempt of a job: the same throw fails it; the record stays released.
    const last = fakeJob('pay-2', {}, { attempts: 1 });
    expect(await thrown(t.processor(last))).toBe(boom);
    expect(t.decisions()[1]).toMatchObject({ action: 'fail', reason: 'handler-error', attempt: 1 });
    expect(t.events.filter((e) => e.type === 'retryScheduled')).toHaveLength(1);
  });

  it('maxAttempts reached: the job fails with an UnrecoverableError holding the dead-letter fields, and a later job of the key too', async () => {
    const t = setup();
    t.handle(() => {
      throw new Error('declined');
    });
    const job = fakeJob('pay-1', {}, { attempts: 5 });
    await thrown(t.processor(job));
    job.attemptsMade = 1;
    const error = await thrown(t.processor(job));
    expect(error.name).toBe('UnrecoverableError');
    expect(readDeadLetter(error.message)).toMatchObject({
      [DEAD_LETTER_FIELDS.reason]: 'attempts-exhausted',
      [DEAD_LETTER_FIELDS.attempt]: '2',
      [DEAD_LETTER_FIELDS.key]: 'pay-1',
      [DEAD_LETTER_FIELDS.outcome]: 'ACQUIRED',
    });
    expect(await t.store.get({ scope: 'pay', key: 'pay-1' })).toMatchObject({
      state: 'FAILED',
      deadLettered: true,
    });
    const again = await thrown(t.processor(fakeJob('pay-1', {})));
    expect(readDeadLetter(again.message)).toMatchObject({ [DEAD_LETTER_FIELDS.reason]: 'failed-record' });
    expect(t.runs).toHaveLength(2);
  });

  it.each([
    ['a NonRetryableError', () => Promise.reject(new NonRetryableError('card stolen')), 'non-retryable'],
  ])('%s fails the job at once', async (_, h, reason) => {
    const t = setup({}, h);
    const error = await thrown(t.processor(fakeJob('pay-1', {}, { attempts: 5 })));
    expect(readDeadLetter(error.message)?.[DEAD_LETTER_FIELDS.reason]).toBe(reason);
  });

  it('the same key with other data is a PAYLOAD_MISMATCH: failed without running', async () => {
    const t = setup();
    await t.processor(fakeJob('pay-1', { amount: 1 }));
    const error = await thrown(t.processor(fakeJob('pay-1', { amount: 2 })));
    expect(readDeadLetter(error.message)?.[DEAD_LETTER_FIELDS.reason]).toBe('payload-mismatch');
    expect(t.runs).toHaveLength(1);
  });

  it("a job without a key (BullMQ's counter id) fails as missing-key, or runs unprotected with missingKey 'process'", async () => {
    const t = setup();
    const error = await thrown(t.processor(fakeJob('17')));
    expect(readDeadLetter(error.message)).toMatchObject({
      [DEAD_LETTER_FIELDS.reason]: 'missing-key',
      [DEAD_LETTER_FIELDS.outcome]: 'NONE',
    });
    expect(t.events.find((e) => e.type === 'missingKey')).toMatchObject({ action: 'dead-letter' });
    const p = setup({ missingKey: 'process' });
    expect(await p.processor(fakeJob('18'))).toEqual({ charged: undefined });
    expect(p.runs).toEqual(['undefined#1 UNPROTECTED']);
  });

  it('an extractor that throws is an invalid-key dead letter', async () => {
    const t = setup({
      idempotencyKey: () => {
        throw new Error('no data');
      },
    });
    const error = await thrown(t.processor(fakeJob('pay-1')));
    expect(readDeadLetter(error.message)?.[DEAD_LETTER_FIELDS.reason]).toBe('invalid-key');
    expect(t.events.find((e) => e.type === 'invalidKey')).toBeDefined();
    expect(t.runs).toEqual([]);
  });

  it('a store that does not answer: nothing runs, the job goes back to delayed, the attached worker pauses and resumes once a ping answers', async () => {
    const t = setup();
    const worker = t.processor.attach(new FakeWorker({ lockDuration: 1000 }));
    let down = true;
    const claim = t.store.claim.bind(t.store);
    const claims = jest
      .spyOn(t.store, 'claim')
      .mockImplementation((...a) => (down ? Promise.reject(new StoreUnavailableError('down')) : claim(...a)));
    jest.spyOn(t.store, 'ping').mockImplementation(async () => {
      if (down) throw new StoreUnavailableError('down');
    });
    const first = fakeJob('pay-1');
    expect((await thrown(t.processor(first))).name).toBe('DelayedError');
    expect(first.delays[0]).toBeGreaterThan(900);
    expect(worker.calls).toEqual(['pause']);
    // While the gate is closed a job goes back without a claim.
    const second = fakeJob('pay-2');
    expect((await thrown(t.processor(second))).name).toBe('DelayedError');
    expect(claims).toHaveBeenCalledTimes(1);
    expect(t.decisions()).toEqual([
      { action: 'delay', reason: 'store-unavailable', delayMs: 1000 },
      { action: 'delay', reason: 'store-unavailable', delayMs: 1000 },
    ]);
    const recovered = new Promise((resolve) => t.processor.events.once('storeRecovered', resolve));
    down = false;
    await recovered;
    expect(worker.calls).toEqual(['pause', 'resume']);
    expect(await t.processor(fakeJob('pay-1'))).toEqual({ charged: 'pay-1' });
    expect(t.runs).toEqual(['pay-1#1 ACQUIRED']);
  });

  it("failing open (the runner's storeFailureMode 'open'), a job whose claim is not answered runs UNPROTECTED and completes", async () => {
    const store = new MemoryIdempotencyStore();
    const idempotency = new Idempotency({ store, logger: false }, { storeFailureMode: 'open' });
    jest.spyOn(store, 'claim').mockRejectedValue(new StoreUnavailableError('down'));
    const outcomes: string[] = [];
    const processor = idempotentProcessor({ idempotency, logger: false }, {}, ({ outcome, key }) => {
      outcomes.push(`${key} ${outcome}`);
      return 'charged';
    });
    const job = fakeJob('pay-1');
    expect(await processor(job)).toBe('charged');
    expect(outcomes).toEqual(['pay-1 UNPROTECTED']);
    expect(job.moveToDelayed).not.toHaveBeenCalled();
    processor.close();
  });

  it('a worker its owner paused is left paused', async () => {
    const t = setup();
    const worker = t.processor.attach(new FakeWorker({ lockDuration: 1000 }));
    worker.paused = true;
    let down = true;
    jest.spyOn(t.store, 'claim').mockImplementation(() => Promise.reject(new StoreUnavailableError('down')));
    jest.spyOn(t.store, 'ping').mockImplementation(async () => {
      if (down) throw new StoreUnavailableError('down');
    });
    await thrown(t.processor(fakeJob('pay-1')));
    const recovered = new Promise((resolve) => t.processor.events.once('storeRecovered', resolve));
    down = false;
    await recovered;
    expect(worker.calls).toEqual([]);
  });

  it("attach refuses a lease shorter than the worker's lockDuration (BullMQ's 30 s by default)", () => {
    const t = setup();
    expect(() => t.processor.attach(new FakeWorker())).toThrow(InvalidOptionError);
    expect(() => t.processor.attach(new FakeWorker({ lockDuration: 1001 }))).toThrow(/lockDuration \(1001\)/);
    expect(() => setup({ leaseMs: 30_000 }).processor.attach(new FakeWorker())).not.toThrow();
  });

  it('closes once every attached worker is closing: a job then goes back at once, its claim given back', async () => {
    const t = setup();
    const a = t.processor.attach(new FakeWorker({ lockDuration: 1000 }));
    const b = t.processor.attach(new FakeWorker({ lockDuration: 1000 }));
    a.emit('closing', 'closing queue');
    expect(await t.processor(fakeJob('pay-1'))).toEqual({ charged: 'pay-1' });
    b.emit('closing', 'closing queue');
    const job = fakeJob('pay-2');
    expect((await thrown(t.processor(job))).name).toBe('DelayedError');
    expect(job.delays[0]).toBeLessThanOrEqual(0);
    expect(t.decisions()[1]).toEqual({ action: 'delay', reason: 'stopping', delayMs: 0 });
    expect(await t.store.get({ scope: 'pay', key: 'pay-2' })).toMatchObject({
      state: 'RELEASED',
      attempt: 0,
    });
  });

  it('a failed moveToDelayed is a brokerError, and the run still ends with a DelayedError (the job stalls back)', async () => {
    const t = setup({ maxConflictDelayMs: 100 });
    const errors: unknown[] = [];
    t.processor.events.on('brokerError', (e) => errors.push(e));
    let release!: () => void;
    t.handle(() => new Promise<void>((resolve) => (release = resolve)));
    const running = t.processor(fakeJob('pay-1'));
    await new Promise((r) => setImmediate(r));
    const second = fakeJob('pay-1');
    second.moveToDelayed.mockRejectedValueOnce(new Error('Missing lock for job pay-1. moveToDelayed'));
    expect((await thrown(t.processor(second))).name).toBe('DelayedError');
    expect(errors).toEqual([
      expect.objectContaining({
        operation: 'moveToDelayed',
        source: expect.objectContaining({ jobId: 'pay-1' }),
      }),
    ]);
    release();
    await running;
  });

  it('refuses a missing runner or handler', () => {
    expect(() => idempotentProcessor({} as never, {}, () => 1)).toThrow(InvalidOptionError);
    const idempotency = new Idempotency({ store: new MemoryIdempotencyStore(), logger: false });
    expect(() => idempotentProcessor({ idempotency }, {}, undefined as never)).toThrow(InvalidOptionError);
  });
});
