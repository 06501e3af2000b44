import {
  HandlerTimeoutError,
  Idempotency,
  type IdempotencyOptions,
  InvalidOptionError,
  MemoryIdempotencyStore,
  StoreUnavailableError,
  UnexpectedReplyError,
} from '@idempotent-consumer/core';
import {
  idempotentEachBatch,
  idempotentEachMessage,
  type KafkaHandler,
  type KafkaIdempotencyOptions,
  PartitionPausedError,
} from '../src';
import { batchPayload, FakeConsumer, FakeProducer, message, messagePayload } from './fakes';

/** A wrapper on a memory store, with the runner's events and the wrapper's log lines recorded. */
function setup<T>(
  handler: KafkaHandler<T>,
  options: KafkaIdempotencyOptions = {},
  runner: IdempotencyOptions = {},
) {
  const store = new MemoryIdempotencyStore();
  const idempotency = new Idempotency({ store, logger: false }, { leaseMs: 1000, maxAttempts: 2, ...runner });
  const producer = new FakeProducer();
  const lines: { level: 'warn' | 'error'; message: string }[] = [];
  const logger = {
    warn: (message: string) => lines.push({ level: 'warn', message }),
    error: (message: string) => lines.push({ level: 'error', message }),
  };
  const eachMessage = idempotentEachMessage(
    { idempotency, consumer: new FakeConsumer(), producer, logger },
    { groupId: 'g', retryBackoff: { baseMs: 5, jitter: 'none' }, ...options },
    handler,
  );
  const runnerEvents: { type: string; [field: string]: unknown }[] = [];
  for (const type of [
    'failOpen',
    'completed',
    'resultOmitted',
    'failed',
    'leaseLost',
    'storeError',
  ] as const) {
    idempotency.on(type, (payload: object) => runnerEvents.push({ type, ...payload }));
  }
  return { store, idempotency, producer, lines, eachMessage, runnerEvents };
}

const keyed = (offset: number, key: string) =>
  messagePayload('pay', 0, message(offset, 'v', { 'idempotency-key': key }));

describe('Kafka fail-open goes through the runner', () => {
  it("emits the runner's failOpen event and runs UNPROTECTED with this wrapper's attempt count", async () => {
    const seen: unknown[] = [];
    const t = setup(
      ({ key, outcome, attempt, fencingToken }) => {
        seen.push({ key, outcome, attempt, fencingToken });
      },
      {},
      { storeFailureMode: 'open' },
    );
    jest.spyOn(t.store, 'claim').mockRejectedValue(new StoreUnavailableError('down'));
    await t.eachMessage(keyed(0, 'k1'));
    expect(seen).toEqual([{ key: 'k1', outcome: 'UNPROTECTED', attempt: 1, fencingToken: 0 }]);
    expect(t.runnerEvents.filter((e) => e.type === 'failOpen')).toEqual([
      expect.objectContaining({ scope: 'g/pay', key: 'k1', error: expect.any(StoreUnavailableError) }),
    ]);
    t.eachMessage.close();
  });

  it("runs claimed when the runner's own claim is answered (the store came back)", async () => {
    const seen: unknown[] = [];
    const t = setup(({ outcome }) => void seen.push(outcome), {}, { storeFailureMode: 'open' });
    const claim = t.store.claim.bind(t.store);
    jest
      .spyOn(t.store, 'claim')
      .mockRejectedValueOnce(new StoreUnavailableError('down'))
      .mockImplementation((...a) => claim(...a));
    await t.eachMessage(keyed(0, 'k2'));
    expect(seen).toEqual(['ACQUIRED']);
    expect(t.runnerEvents.some((e) => e.type === 'failOpen')).toBe(false);
    expect(await t.store.get({ scope: 'g/pay', key: 'k2' })).toMatchObject({ state: 'COMPLETED' });
    t.eachMessage.close();
  });
});

describe('Kafka completion write goes through the runner', () => {
  it("emits the runner's completed event (recorded) once the store takes the write", async () => {
    const t = setup(
      () => 'done',
      { storeProbeBackoff: { baseMs: 1, maxMs: 1, jitter: 'none' } },
      { writeAttempts: 1 },
    );
    const complete = t.store.complete.bind(t.store);
    jest
      .spyOn(t.store, 'complete')
      .mockRejectedValueOnce(new StoreUnavailableError('down'))
      .mockImplementation((...a) => complete(...a));
    await t.eachMessage(keyed(0, 'k'));
    const completed = t.runnerEvents.filter((e) => e.type === 'completed').map((e) => e.recorded);
    expect(completed).toEqual([false, true]);
    expect(await t.store.get({ scope: 'g/pay', key: 'k' })).toMatchObject({ state: 'COMPLETED' });
    t.eachMessage.close();
  });

  it("honours onResultTooLarge 'fail': a result too large at the late write is FAILED and dead-lettered", async () => {
    // Small when the runner encodes it, large when the wrapper's write encodes it again.
    let encodings = 0;
    const result = { toJSON: () => (encodings++ === 0 ? 'x' : 'y'.repeat(500)) };
    const t = setup(
      () => result,
      { storeProbeBackoff: { baseMs: 1, maxMs: 1, jitter: 'none' } },
      { writeAttempts: 1, maxResultBytes: 100, onResultTooLarge: 'fail' },
    );
    const complete = t.store.complete.bind(t.store);
    jest
      .spyOn(t.store, 'complete')
      .mockRejectedValueOnce(new StoreUnavailableError('down'))
      .mockImplementation((...a) => complete(...a));
    await t.eachMessage(keyed(0, 'big'));
    expect(t.runnerEvents).toContainEqual(
      expect.objectContaining({ type: 'failed', key: 'big', reason: 'result-too-large', recorded: true }),
    );
    expect(await t.store.get({ scope: 'g/pay', key: 'big' })).toMatchObject({ state: 'FAILED' });
    expect(t.producer.sent[0]!.messages[0]!.headers).toMatchObject({
      'x-idempotency-dead-letter-reason': 'result-too-large',
    });
    t.eachMessage.close();
  });

  it('stops on an error that is not an outage: the offset stays unresolved, with storeError and an error line', async () => {
    const t = setup(
      () => 'done',
      { storeProbeBackoff: { baseMs: 1, maxMs: 1, jitter: 'none' } },
      { writeAttempts: 1 },
    );
    const complete = jest
      .spyOn(t.store, 'complete')
      .mockRejectedValueOnce(new StoreUnavailableError('down'))
      .mockRejectedValue(new UnexpectedReplyError('a reply this version cannot read'));
    const storeErrors: unknown[] = [];
    t.eachMessage.events.on('storeError', (e) => storeErrors.push(e.error));
    const error = await t.eachMessage(keyed(0, 'k')).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(PartitionPausedError);
    expect(complete).toHaveBeenCalledTimes(2); // the runner's try, then one of the wrapper's: no loop
    expect(storeErrors.at(-1)).toBeInstanceOf(UnexpectedReplyError);
    expect(t.lines.filter((l) => l.level === 'error').map((l) => l.message)).toContainEqual(
      expect.stringContaining('stays unresolved'),
    );
    t.eachMessage.close();
  });
});

describe('Kafka leaseLost', () => {
  it("is emitted when another worker takes the claim while the handler runs, with during 'heartbeat'", async () => {
    let nowMs = 1_000_000;
    const store = new MemoryIdempotencyStore({ now: () => nowMs });
    const idempotency = new Idempotency({ store, logger: false }, { leaseMs: 300, maxAttempts: 3 });
    let runs = 0;
    const eachMessage = idempotentEachMessage(
      { idempotency, consumer: new FakeConsumer(), producer: new FakeProducer(), logger: false },
      { groupId: 'g', conflictWaitMs: 0, maxInlineDelayMs: 0 },
      async ({ signal }) => {
        runs++;
        // The lease lapses and another worker claims the key: the next extension is refused.
        nowMs += 10_000;
        await store.claim(
          { scope: 'g/pay', key: 'k' },
          { leaseMs: 60_000, retentionMs: 60_000, maxAttempts: 5 },
        );
        await new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }));
        throw new Error('aborted');
      },
    );
    const lost: unknown[] = [];
    eachMessage.events.on('leaseLost', (e) =>
      lost.push({ during: e.during, handlerCompleted: e.handlerCompleted, reason: e.reason }),
    );
    const end = await eachMessage(keyed(0, 'k')).catch((e: unknown) => e);
    expect(runs).toBe(1);
    expect(lost).toEqual([{ during: 'heartbeat', handlerCompleted: false, reason: 'taken-over' }]);
    // Claimed again at once: the other worker holds it, so the partition pauses (the offset unresolved).
    expect(end).toBeInstanceOf(PartitionPausedError);
    eachMessage.close();
  }, 20_000);
});

describe('Kafka unprotected runs', () => {
  it('hand the handler a signal that aborts when the wrapper closes', async () => {
    let started!: () => void;
    const running = new Promise<void>((resolve) => {
      started = resolve;
    });
    let reason: unknown = 'not aborted';
    const t = setup(
      async ({ signal }) => {
        started();
        await new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }));
        reason = signal.reason;
        return 'stopped';
      },
      { idempotencyKey: () => undefined, missingKey: 'process' },
    );
    const done = t.eachMessage(messagePayload('pay', 0, message(0, 'v'))).catch((e: unknown) => e);
    await running;
    t.eachMessage.close();
    await done;
    expect(reason).not.toBe('not aborted');
  });

  it('are bounded by handlerTimeoutMs: the signal aborts with a HandlerTimeoutError and the run counts as thrown', async () => {
    const reasons: unknown[] = [];
    const t = setup(
      async ({ signal }) => {
        await new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }));
        reasons.push(signal.reason);
      },
      { idempotencyKey: () => undefined, missingKey: 'process', handlerTimeoutMs: 20 },
    );
    await t.eachMessage(messagePayload('pay', 0, message(0, 'v')));
    expect(reasons).toHaveLength(2); // maxAttempts 2, then dead-lettered
    expect(reasons[0]).toBeInstanceOf(HandlerTimeoutError);
    expect(t.producer.sent[0]!.messages[0]!.headers).toMatchObject({
      'x-idempotency-dead-letter-reason': 'attempts-exhausted',
      'x-idempotency-error': expect.stringContaining('HandlerTimeoutError'),
    });
    t.eachMessage.close();
  });
});

describe('Kafka handlerTimeoutMs', () => {
  it('passes to the runner: a claimed handler past it is aborted and retried', async () => {
    const attempts: number[] = [];
    const t = setup(
      async ({ signal, attempt }) => {
        attempts.push(attempt);
        if (attempt > 1) return 'ok';
        await new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }));
        throw signal.reason;
      },
      { handlerTimeoutMs: 20 },
    );
    await t.eachMessage(keyed(0, 'slow'));
    expect(attempts).toEqual([1, 2]);
    expect(await t.store.get({ scope: 'g/pay', key: 'slow' })).toMatchObject({ state: 'COMPLETED' });
    t.eachMessage.close();
  });

  it('is checked with the runner ranges when the wrapper is built', () => {
    expect(() => setup(() => {}, { handlerTimeoutMs: -1 })).toThrow(InvalidOptionError);
    expect(() => setup(() => {}, { leaseMs: 0 })).toThrow(InvalidOptionError);
  });
});

describe('Kafka warnings', () => {
  it('say the message is dropped, not dead-lettered, when deadLetterTopic is false', async () => {
    const store = new MemoryIdempotencyStore();
    const idempotency = new Idempotency({ store, logger: false });
    const lines: string[] = [];
    const eachMessage = idempotentEachMessage(
      { idempotency, consumer: new FakeConsumer(), logger: { warn: (m) => lines.push(m), error: () => {} } },
      { groupId: 'g', deadLetterTopic: false, idempotencyKey: () => undefined },
      () => 'never',
    );
    await eachMessage(messagePayload('pay', 0, message(0, 'v')));
    expect(lines).toEqual([expect.stringContaining('dropped')]);
    expect(lines[0]).not.toContain('dead-lettered');
    eachMessage.close();
  });
});

describe('Kafka leaseLost at the start of a batch reservation', () => {
  it("is emitted with during 'start' when the reservation was lost before its handler started", async () => {
    const store = new MemoryIdempotencyStore();
    const idempotency = new Idempotency({ store, logger: false }, { leaseMs: 1000, maxAttempts: 3 });
    const runs: string[] = [];
    const eachBatch = idempotentEachBatch(
      { idempotency, consumer: new FakeConsumer(), producer: new FakeProducer(), logger: false },
      { groupId: 'g', conflictWaitMs: 0, maxInlineDelayMs: 0 },
      ({ key }) => void runs.push(key ?? ''),
    );
    // The first start is refused (another claim took the key): nothing runs for it.
    jest
      .spyOn(store, 'start')
      .mockResolvedValueOnce({ ok: false, state: 'IN_PROGRESS', currentFencingToken: 1 } as never);
    const lost: unknown[] = [];
    eachBatch.events.on('leaseLost', (e) =>
      lost.push({ key: e.key, during: e.during, handlerCompleted: e.handlerCompleted }),
    );
    await eachBatch(batchPayload('pay', 0, [message(0, 'v', { 'idempotency-key': 'r' })]));
    expect(lost).toEqual([{ key: 'r', during: 'start', handlerCompleted: false }]);
    eachBatch.close();
  });
});

describe('Kafka broker heartbeat during a lease extension', () => {
  it('a broker heartbeat that does not answer does not hold the lease extensions: the lease is kept and the run completes', async () => {
    const store = new MemoryIdempotencyStore();
    let extensions = 0;
    let extended: (() => void) | undefined;
    const extend = store.extend.bind(store);
    store.extend = async (...args: Parameters<typeof store.extend>) => {
      const reply = await extend(...args);
      extensions++;
      extended?.();
      return reply;
    };
    const idempotency = new Idempotency(
      { store, logger: false },
      // A lease long enough that a busy machine's pauses do not lose it; an awaited broker heartbeat
      // that never answers stops the extensions after the first, so the four are never reached.
      { leaseMs: 5000, heartbeatIntervalMs: 50, maxAttempts: 3 },
    );
    const eachMessage = idempotentEachMessage(
      { idempotency, consumer: new FakeConsumer(), producer: new FakeProducer(), logger: false },
      { groupId: 'g', conflictWaitMs: 0, maxInlineDelayMs: 0 },
      async ({ signal }) => {
        // Runs until the lease was extended four times (four heartbeat intervals, about a lease in
        // all), or until the claim is reported lost.
        await new Promise<void>((resolve) => {
          extended = () => {
            if (extensions >= 4) resolve();
          };
          signal.addEventListener('abort', () => resolve(), { once: true });
        });
        return signal.aborted ? 'lost' : 'kept';
      },
    );
    const lost: unknown[] = [];
    eachMessage.events.on('leaseLost', (e) => lost.push(e.during));
    const settled: unknown[] = [];
    eachMessage.events.on('settled', (e) => settled.push(e.decision.action));
    // KafkaJS's heartbeat waits on the group coordinator (up to its requestTimeout when the broker hangs).
    const hanging = { ...keyed(0, 'k'), heartbeat: () => new Promise<void>(() => {}) };
    await eachMessage(hanging);
    expect(lost).toEqual([]);
    expect(extensions).toBeGreaterThanOrEqual(4);
    expect(settled).toEqual(['resolve']);
    eachMessage.close();
  }, 10_000);
});
