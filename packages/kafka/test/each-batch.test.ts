import { Idempotency, MemoryIdempotencyStore } from '@idempotent-consumer/core';
import { settlesWithin } from '../../../integration-tests/support/net';
import { TelemetrySdk } from '../../../integration-tests/support/telemetry';
import { idempotentEachBatch } from '../src';
import { batchPayload, FakeConsumer, FakeProducer, message } from './fakes';

function setup(options: Record<string, unknown> = {}) {
  const store = new MemoryIdempotencyStore();
  const idempotency = new Idempotency({ store, logger: false }, { leaseMs: 1000, maxAttempts: 3 });
  const consumer = new FakeConsumer();
  const producer = new FakeProducer();
  const runs: string[] = [];
  const failing = new Set<string>();
  const eachBatch = idempotentEachBatch(
    { idempotency, consumer, producer, logger: false },
    { groupId: 'g', maxInlineDelayMs: 0, retryBackoff: { baseMs: 60_000, jitter: 'none' }, ...options },
    ({ key, attempt }) => {
      runs.push(`${key}#${attempt}`);
      if (failing.has(key ?? '')) throw new Error('down');
    },
  );
  return { store, consumer, producer, runs, failing, eachBatch };
}

const keyed = (offset: number, key: string) => message(offset, key, { 'idempotency-key': key });

describe('idempotentEachBatch', () => {
  it('claims the batch in one call and resolves offsets in order', async () => {
    const t = setup();
    const claimMany = jest.spyOn(t.store, 'claimMany');
    const payload = batchPayload('pay', 0, [keyed(0, 'a'), keyed(1, 'b'), keyed(2, 'a'), keyed(3, 'c')]);
    await t.eachBatch(payload);
    expect(claimMany).toHaveBeenCalledTimes(1);
    expect(claimMany.mock.calls[0]![0].map((r) => r.id.key)).toEqual(['a', 'b', 'c']);
    expect(t.runs).toEqual(['a#1', 'b#1', 'c#1']);
    expect(payload.resolved).toEqual(['0', '1', '2', '3']);
  });

  it('stops at a message that must wait, releases the claims behind it, and claims it alone next time', async () => {
    const t = setup();
    t.failing.add('b');
    const first = batchPayload('pay', 0, [keyed(0, 'a'), keyed(1, 'b'), keyed(2, 'c')]);
    await t.eachBatch(first);
    expect(first.resolved).toEqual(['0']);
    expect(t.consumer.calls[0]).toEqual({ method: 'pause', topics: [{ topic: 'pay', partitions: [0] }] });
    // c never ran: its reservation (core claimMany) is given back without an attempt spent.
    expect(await t.store.get({ scope: 'g/pay', key: 'c' })).toMatchObject({ state: 'RELEASED', attempt: 0 });

    // Redelivered from the stuck offset: b is claimed alone; c is not claimed while b keeps failing.
    const claimMany = jest.spyOn(t.store, 'claimMany');
    await t.eachBatch(batchPayload('pay', 0, [keyed(1, 'b'), keyed(2, 'c')]));
    expect(claimMany.mock.calls[0]![0].map((r) => r.id.key)).toEqual(['b']);
    expect(await t.store.get({ scope: 'g/pay', key: 'c' })).toMatchObject({ attempt: 0 });

    // b's last attempt fails: dead-lettered and resolved; c then runs.
    const last = batchPayload('pay', 0, [keyed(1, 'b'), keyed(2, 'c')]);
    await t.eachBatch(last);
    expect(last.resolved).toEqual(['1', '2']);
    // c runs as attempt 1: the batches that gave its reservation back spent none.
    expect(t.runs).toEqual(['a#1', 'b#1', 'b#2', 'b#3', 'c#1']);
    expect(t.producer.sent).toHaveLength(1);
    t.eachBatch.close();
  });

  it('stops without resolving when the batch goes stale', async () => {
    const t = setup();
    let stale = false;
    const payload = batchPayload('pay', 0, [keyed(0, 'a'), keyed(1, 'b')], { stale: () => stale });
    const run = t.eachBatch(payload);
    stale = true;
    await run;
    expect(payload.resolved.length).toBeLessThan(2);
  });

  it("a reservation's start the store does not answer runs nothing, emits storeUnavailable once and pauses the topic until a ping answers; the reservation is given back then", async () => {
    const { StoreUnavailableError } = await import('@idempotent-consumer/core');
    const t = setup({ maxInlineDelayMs: 0, storeProbeBackoff: { baseMs: 5, maxMs: 5, jitter: 'none' } });
    let down = true;
    const start = t.store.start.bind(t.store);
    jest
      .spyOn(t.store, 'start')
      .mockImplementation((...a) => (down ? Promise.reject(new StoreUnavailableError('down')) : start(...a)));
    jest.spyOn(t.store, 'ping').mockImplementation(async () => {
      if (down) throw new StoreUnavailableError('down');
    });
    const kinds: string[] = [];
    for (const type of ['storeUnavailable', 'storeRecovered', 'storeError'] as const) {
      t.eachBatch.events.on(type, (e: object) =>
        kinds.push('operation' in e ? `${type} ${String(e.operation)}` : type),
      );
    }
    const payload = batchPayload('pay', 0, [keyed(0, 'a'), keyed(1, 'b')]);
    await t.eachBatch(payload);
    expect(t.runs).toEqual([]);
    expect(payload.resolved).toEqual([]);
    expect(kinds).toEqual(['storeUnavailable']);
    expect(t.consumer.calls).toEqual([{ method: 'pause', topics: [{ topic: 'pay' }] }]);

    // The store answers: the topic resumes, and a's reservation (whose start may have been applied) is
    // given back, so its re-fetch claims it at once.
    const release = t.store.release.bind(t.store);
    const givenBack = new Promise<void>((resolve) => {
      jest.spyOn(t.store, 'release').mockImplementation(async (...a) => {
        const reply = await release(...a);
        if (a[0].key === 'a') resolve();
        return reply;
      });
    });
    const recovered = new Promise((resolve) => t.eachBatch.events.once('storeRecovered', resolve));
    down = false;
    await recovered;
    await givenBack;
    expect(t.consumer.calls[1]).toEqual({ method: 'resume', topics: [{ topic: 'pay' }] });
    expect(await t.store.get({ scope: 'g/pay', key: 'a' })).toMatchObject({ state: 'RELEASED', attempt: 0 });
    const again = batchPayload('pay', 0, [keyed(0, 'a'), keyed(1, 'b')]);
    await t.eachBatch(again);
    expect(t.runs).toEqual(['a#1', 'b#1']);
    expect(again.resolved).toEqual(['0', '1']);
    t.eachBatch.close();
  });

  it('the claims a batch stopped during an outage leaves unrun are given back once the store answers: RELEASED, no attempt spent', async () => {
    const { StoreUnavailableError } = await import('@idempotent-consumer/core');
    const t = setup({ maxInlineDelayMs: 0, storeProbeBackoff: { baseMs: 5, maxMs: 5, jitter: 'none' } });
    let down = true;
    const unanswered = () => Promise.reject(new StoreUnavailableError('down'));
    const start = t.store.start.bind(t.store);
    const release = t.store.release.bind(t.store);
    jest.spyOn(t.store, 'start').mockImplementation((...a) => (down ? unanswered() : start(...a)));
    jest.spyOn(t.store, 'ping').mockImplementation(async () => {
      if (down) throw new StoreUnavailableError('down');
    });
    const givenBack = new Set<string>();
    let bothGivenBack!: () => void;
    const both = new Promise<void>((resolve) => {
      bothGivenBack = resolve;
    });
    jest.spyOn(t.store, 'release').mockImplementation(async (...a) => {
      if (down) return unanswered();
      const reply = await release(...a);
      givenBack.add(a[0].key);
      if (givenBack.size === 2) bothGivenBack();
      return reply;
    });
    // a's start meets the store down: the batch stops there, and b's reservation, never run, is given back
    // once the store gate (closed by a's start) opens.
    const payload = batchPayload('pay', 0, [keyed(0, 'a'), keyed(1, 'b')]);
    try {
      await t.eachBatch(payload);
      expect(t.runs).toEqual([]);
      expect(await t.store.get({ scope: 'g/pay', key: 'b' })).toMatchObject({ state: 'IN_PROGRESS' });
      down = false;
      // Before the fix b's release was tried once, unanswered: it stayed IN_PROGRESS until its lease lapsed.
      // Bounded, then asserted.
      await Promise.race([both, new Promise((r) => setTimeout(r, 3_000))]);
      for (const key of ['a', 'b']) {
        expect(await t.store.get({ scope: 'g/pay', key })).toMatchObject({ state: 'RELEASED', attempt: 0 });
      }
    } finally {
      t.eachBatch.close(); // ends the gate's probe loop also when an assertion failed
    }
  });

  it("a reservation's start the store answers within maxInlineDelayMs runs the handler once, as attempt 1, without a pause", async () => {
    const { StoreUnavailableError } = await import('@idempotent-consumer/core');
    const t = setup({ maxInlineDelayMs: 5000, storeProbeBackoff: { baseMs: 5, maxMs: 5, jitter: 'none' } });
    const start = t.store.start.bind(t.store);
    // Redis applied the first start and only its reply was lost: the retried start counts it once.
    jest.spyOn(t.store, 'start').mockImplementationOnce(async (...a) => {
      await start(...a);
      throw new StoreUnavailableError('reply lost');
    });
    const unavailable: unknown[] = [];
    t.eachBatch.events.on('storeUnavailable', (e) => unavailable.push(e));
    const payload = batchPayload('pay', 0, [keyed(0, 'a'), keyed(1, 'b')]);
    await t.eachBatch(payload);
    expect(t.runs).toEqual(['a#1', 'b#1']);
    expect(payload.resolved).toEqual(['0', '1']);
    expect(unavailable).toHaveLength(1);
    expect(t.consumer.calls).toEqual([]);
    t.eachBatch.close();
  });

  it("fails open under the runner's storeFailureMode 'open': each message runs UNPROTECTED with its key", async () => {
    const store = new MemoryIdempotencyStore();
    const { StoreUnavailableError } = await import('@idempotent-consumer/core');
    jest.spyOn(store, 'claimMany').mockRejectedValue(new StoreUnavailableError('down'));
    jest.spyOn(store, 'claim').mockRejectedValue(new StoreUnavailableError('down'));
    const idempotency = new Idempotency({ store, logger: false }, { storeFailureMode: 'open' });
    const seen: string[] = [];
    const eachBatch = idempotentEachBatch(
      { idempotency, consumer: new FakeConsumer(), producer: new FakeProducer(), logger: false },
      { groupId: 'g' },
      ({ key, outcome }) => {
        seen.push(`${key} ${outcome}`);
      },
    );
    const payload = batchPayload('pay', 0, [keyed(0, 'a'), keyed(1, 'b')]);
    await eachBatch(payload);
    expect(seen).toEqual(['a UNPROTECTED', 'b UNPROTECTED']);
    expect(payload.resolved).toEqual(['0', '1']);
    eachBatch.close();
  });
});

describe('idempotentEachBatch waits', () => {
  it('a CONFLICT of the batch claim waits for the holder with reserve: true; the claim it ends with costs no attempt until it runs', async () => {
    const store = new MemoryIdempotencyStore();
    const idempotency = new Idempotency({ store, logger: false }, { leaseMs: 1000, maxAttempts: 3 });
    const held = await idempotency.claim({ scope: 'g/pay', key: 'k' });
    const wait = jest.spyOn(idempotency, 'waitForOutcome');
    const runs: number[] = [];
    const eachBatch = idempotentEachBatch(
      { idempotency, consumer: new FakeConsumer(), producer: new FakeProducer(), logger: false },
      { groupId: 'g', conflictWaitMs: 2000 },
      ({ attempt }) => {
        runs.push(attempt);
      },
    );
    const payload = batchPayload('pay', 0, [keyed(0, 'k')]);
    const running = eachBatch(payload);
    await new Promise((r) => setTimeout(r, 50));
    if (held.outcome !== 'ACQUIRED') throw new Error('expected the key held');
    // The holder's handler threw a retryable error: the runner releases, its attempt stays counted.
    await store.release({ scope: 'g/pay', key: 'k' }, held.fencingToken, { retentionMs: 60_000 });
    await running;
    expect(wait.mock.calls[0]![1]).toMatchObject({ reserve: true });
    expect(runs).toEqual([2]); // the holder's attempt, then this run's
    expect(payload.resolved).toEqual(['0']);
    eachBatch.close();
  });
  it('a rebalance while a completion write waits for the store rejects eachBatch with the rebalance error; nothing resolves or pauses', async () => {
    const { StoreUnavailableError } = await import('@idempotent-consumer/core');
    const store = new MemoryIdempotencyStore();
    const idempotency = new Idempotency({ store, logger: false }, { leaseMs: 1000, writeAttempts: 1 });
    jest.spyOn(store, 'complete').mockRejectedValue(new StoreUnavailableError('down'));
    jest.spyOn(store, 'ping').mockRejectedValue(new StoreUnavailableError('down'));
    const consumer = new FakeConsumer();
    const eachBatch = idempotentEachBatch(
      { idempotency, consumer, producer: new FakeProducer(), logger: false },
      {
        groupId: 'g',
        brokerHeartbeatIntervalMs: 1,
        storeProbeBackoff: { baseMs: 5, maxMs: 5, jitter: 'none' },
      },
      () => 'done',
    );
    const storeErrors: unknown[] = [];
    eachBatch.events.on('storeError', (e) => storeErrors.push(e.operation));
    let rebalancing = false;
    eachBatch.events.once('storeUnavailable', () => {
      rebalancing = true; // the group rebalances while the write waits
    });
    const rebalance = Object.assign(new Error('The group is rebalancing, so a rejoin is needed'), {
      name: 'KafkaJSProtocolError',
      type: 'REBALANCE_IN_PROGRESS',
      retriable: true,
    });
    const payload = {
      ...batchPayload('pay', 0, [keyed(0, 'a')]),
      heartbeat: async () => {
        if (rebalancing) throw rebalance;
      },
    };
    await expect(eachBatch(payload)).rejects.toBe(rebalance);
    expect(payload.resolved).toEqual([]);
    expect(consumer.calls).toEqual([]);
    expect(storeErrors).not.toContain('process');
    eachBatch.close();
  });
});

describe('idempotentEachBatch completion written late', () => {
  it('a completion write a stale batch ended lands once the store answers again: the offset stays unresolved, the record COMPLETED (the re-fetch is a DUPLICATE)', async () => {
    const { StoreUnavailableError } = await import('@idempotent-consumer/core');
    const store = new MemoryIdempotencyStore();
    const idempotency = new Idempotency({ store, logger: false }, { leaseMs: 10_000, writeAttempts: 1 });
    let down = true;
    const complete = store.complete.bind(store);
    jest.spyOn(store, 'complete').mockImplementation(async (...args) => {
      if (down) throw new StoreUnavailableError('down');
      return complete(...args);
    });
    const ping = store.ping.bind(store);
    jest.spyOn(store, 'ping').mockImplementation(async () => {
      if (down) throw new StoreUnavailableError('down');
      return ping();
    });
    const runs: string[] = [];
    const eachBatch = idempotentEachBatch(
      { idempotency, consumer: new FakeConsumer(), producer: new FakeProducer(), logger: false },
      {
        groupId: 'g',
        brokerHeartbeatIntervalMs: 1,
        storeProbeBackoff: { baseMs: 5, maxMs: 5, jitter: 'none' },
      },
      ({ key }) => {
        runs.push(key!);
        return 'done';
      },
    );
    let stale = false;
    eachBatch.events.once('storeUnavailable', () => {
      stale = true; // a seek or a rebalance made the batch stale while the write waits
    });
    const payload = batchPayload('pay', 0, [keyed(0, 'a')], { stale: () => stale });
    await eachBatch(payload);
    expect(payload.resolved).toEqual([]);
    const id = { scope: 'g/pay', key: 'a' };
    expect(await store.get(id)).toMatchObject({ state: 'IN_PROGRESS' });
    try {
      down = false; // well within the claim's lease
      await settlesWithin(
        'the late write',
        (async () => {
          while ((await store.get(id))?.state !== 'COMPLETED') await new Promise((r) => setTimeout(r, 5));
        })(),
        2000,
      );
      // The re-fetch of the message meets a DUPLICATE: the handler does not run again.
      const again = batchPayload('pay', 0, [keyed(0, 'a')]);
      await eachBatch(again);
      expect(again.resolved).toEqual(['0']);
      expect(runs).toEqual(['a']);
    } finally {
      eachBatch.close();
    }
  });
});

describe('idempotentEachBatch settled', () => {
  it("a message that ended while the previous one's completion was written is not reported settled when that write stops the batch: settled once, when its offset resolves", async () => {
    const { StoreUnavailableError } = await import('@idempotent-consumer/core');
    const t = setup({ retryBackoff: { baseMs: 5, jitter: 'none' } });
    // b completed before: a DUPLICATE, settled at once while a's completion is still being written.
    await t.eachBatch(batchPayload('pay', 0, [keyed(1, 'b')]));
    // a's completion: the store is unavailable for the runner's write, then refuses the adapter's.
    jest
      .spyOn(t.store, 'complete')
      .mockRejectedValueOnce(new StoreUnavailableError('down'))
      .mockRejectedValueOnce(new Error('unexpected reply'));
    const settled: string[] = [];
    t.eachBatch.events.on('settled', (e) => settled.push(e.source.offset));
    const first = batchPayload('pay', 0, [keyed(0, 'a'), keyed(1, 'b')]);
    await t.eachBatch(first);
    expect(first.resolved).toEqual([]);
    expect(settled).toEqual([]);
    // b's re-fetch resolves it: settled then, once.
    const again = batchPayload('pay', 0, [keyed(1, 'b')]);
    await t.eachBatch(again);
    expect(again.resolved).toEqual(['1']);
    expect(settled).toEqual(['1']);
    t.eachBatch.close();
  });
});

describe('idempotentEachBatch telemetry', () => {
  it("a message that ended while the previous one's completion was written records no broker action when that write stops the batch: once, when its offset resolves", async () => {
    const { StoreUnavailableError } = await import('@idempotent-consumer/core');
    const sdk = new TelemetrySdk();
    const { tracerProvider, meterProvider } = sdk;
    const actionCount = async (action: 'resolve' | 'pause') =>
      (await sdk.counts('idempotency.broker_actions', 'idempotency.broker_action'))[action] ?? 0;
    const t = setup({
      retryBackoff: { baseMs: 5, jitter: 'none' },
      telemetry: { tracerProvider, meterProvider },
    });
    // b completed before: a DUPLICATE, ended at once while a's completion is still being written.
    await t.eachBatch(batchPayload('pay', 0, [keyed(1, 'b')]));
    sdk.exporter.reset();
    const before = { resolve: await actionCount('resolve'), pause: await actionCount('pause') };
    // a's completion: the store is unavailable for the runner's write, then refuses the adapter's.
    jest
      .spyOn(t.store, 'complete')
      .mockRejectedValueOnce(new StoreUnavailableError('down'))
      .mockRejectedValueOnce(new Error('unexpected reply'));
    const first = batchPayload('pay', 0, [keyed(0, 'a'), keyed(1, 'b')]);
    await t.eachBatch(first);
    expect(first.resolved).toEqual([]);
    // b's re-fetch resolves it: its broker action is recorded then, once.
    const again = batchPayload('pay', 0, [keyed(1, 'b')]);
    await t.eachBatch(again);
    expect(again.resolved).toEqual(['1']);
    const actions = sdk.exporter
      .getFinishedSpans()
      .map((s) => `${s.attributes['messaging.kafka.offset']}:${s.attributes['idempotency.broker_action']}`);
    // a's refused write: a store error, the partition paused (one pause, on a's span); b's first span ends
    // without a broker action.
    expect(actions.sort()).toEqual(['0:pause', '1:resolve', '1:undefined']);
    expect((await actionCount('resolve')) - before.resolve).toBe(1);
    expect((await actionCount('pause')) - before.pause).toBe(1);
    t.eachBatch.close();
    await sdk.close();
  });
});

describe('idempotentEachBatch pause telemetry', () => {
  it("a pause the batch does not carry out (the previous message's completion write stopped it) is not counted: one pause, on the message it stopped at", async () => {
    const { StoreUnavailableError } = await import('@idempotent-consumer/core');
    const sdk = new TelemetrySdk();
    const { tracerProvider, meterProvider } = sdk;
    const store = new MemoryIdempotencyStore();
    // One write try in the runner: the adapter writes a's completion itself, and the store refuses it.
    const idempotency = new Idempotency({ store, logger: false }, { leaseMs: 1000, writeAttempts: 1 });
    const consumer = new FakeConsumer();
    const eachBatch = idempotentEachBatch(
      { idempotency, consumer, producer: new FakeProducer(), logger: false },
      {
        groupId: 'g',
        maxInlineDelayMs: 0,
        retryBackoff: { baseMs: 60_000, jitter: 'none' },
        telemetry: { tracerProvider, meterProvider },
      },
      ({ key }) => {
        if (key === 'b') throw new Error('gateway down');
      },
    );
    jest
      .spyOn(store, 'complete')
      .mockRejectedValueOnce(new StoreUnavailableError('down'))
      .mockRejectedValueOnce(new Error('unexpected reply'));
    const payload = batchPayload('pay', 0, [keyed(0, 'a'), keyed(1, 'b')]);
    await eachBatch(payload);
    expect(payload.resolved).toEqual([]);
    expect(consumer.calls).toEqual([{ method: 'pause', topics: [{ topic: 'pay', partitions: [0] }] }]);
    const actions = sdk
      .spans('process pay')
      .map((s) => `${s.attributes['messaging.kafka.offset']}:${s.attributes['idempotency.broker_action']}`);
    expect(actions.sort()).toEqual(['0:pause', '1:undefined']);
    expect(await sdk.counts('idempotency.broker_actions', 'idempotency.broker_action')).toEqual({ pause: 1 });
    eachBatch.close();
    await sdk.close();
  });
});

describe('idempotentEachBatch scope', () => {
  it('a `scope` function that throws (a TypeError, on which KafkaJS stops the consumer) never escapes: the messages before it resolve, the batch stops at it with a storeError and one pause, nothing behind it runs or stays claimed', async () => {
    const sdk = new TelemetrySdk();
    const { tracerProvider, meterProvider } = sdk;
    let calls = 0;
    const t = setup({
      scope: (topic: string) => {
        calls += 1;
        if (calls === 2) throw new TypeError('no scope');
        return `g/${topic}`;
      },
      telemetry: { tracerProvider, meterProvider },
    });
    const storeErrors: string[] = [];
    t.eachBatch.events.on('storeError', (e) => storeErrors.push(e.operation));
    const payload = batchPayload('pay', 0, [keyed(0, 'a'), keyed(1, 'b'), keyed(2, 'c')]);
    await t.eachBatch(payload);
    expect(payload.resolved).toEqual(['0']);
    expect(t.runs).toEqual(['a#1']);
    expect(storeErrors).toEqual(['process']);
    expect(t.consumer.calls).toEqual([{ method: 'pause', topics: [{ topic: 'pay', partitions: [0] }] }]);
    expect(await t.store.get({ scope: 'g/pay', key: 'c' })).toMatchObject({ state: 'RELEASED', attempt: 0 });
    const actions = sdk
      .spans('process pay')
      .map((s) => `${s.attributes['messaging.kafka.offset']}:${s.attributes['idempotency.broker_action']}`);
    expect(actions.sort()).toEqual(['0:resolve', '1:pause']);
    t.eachBatch.close();
    await sdk.close();
  });
});

describe('idempotentEachBatch scope that is not a string', () => {
  it('a `scope` function that returns no string (plain JavaScript) is handled like one that throws: a storeError and a pause, not a TypeError out of eachBatch', async () => {
    const t = setup({ scope: (() => undefined) as unknown as (topic: string) => string });
    const storeErrors: unknown[] = [];
    t.eachBatch.events.on('storeError', (e) => storeErrors.push(e.error));
    const payload = batchPayload('pay', 0, [keyed(0, 'a')]);
    await t.eachBatch(payload);
    expect(payload.resolved).toEqual([]);
    expect(t.runs).toEqual([]);
    expect(storeErrors).toHaveLength(1);
    expect(storeErrors[0]).toMatchObject({
      code: 'INVALID_OPTION',
      message: 'the scope function returned undefined for topic pay; it must return a non-empty string',
    });
    expect(t.consumer.calls).toEqual([{ method: 'pause', topics: [{ topic: 'pay', partitions: [0] }] }]);
    t.eachBatch.close();
  });
});

describe('idempotentEachBatch close', () => {
  it('close() while a dead-letter produce goes unanswered ends the batch at once: nothing resolves or pauses, nothing behind it runs', async () => {
    const t = setup({ maxAttempts: 1 });
    let sending!: () => void;
    const sent = new Promise<void>((resolve) => {
      sending = resolve;
    });
    // A broker that never answers the produce.
    t.producer.send = () => {
      sending();
      return new Promise<never>(() => {});
    };
    t.failing.add('a');
    const payload = batchPayload('pay', 0, [keyed(0, 'a'), keyed(1, 'b')]);
    const run = t.eachBatch(payload);
    await sent;
    t.eachBatch.close();
    expect(await settlesWithin('eachBatch after close()', run, 2000)).toEqual({
      status: 'fulfilled',
      value: undefined,
    });
    expect(payload.resolved).toEqual([]);
    expect(t.consumer.calls).toEqual([]);
    expect(t.runs).toEqual(['a#1']);
    expect(await t.store.get({ scope: 'g/pay', key: 'a' })).toMatchObject({
      state: 'FAILED',
      deadLettered: false,
    });
  });
});
