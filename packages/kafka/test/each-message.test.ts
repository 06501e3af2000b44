import {
  Idempotency,
  InvalidOptionError,
  MemoryIdempotencyStore,
  NonRetryableError,
} from '@idempotent-consumer/core';
import { TelemetrySdk } from '../../../integration-tests/support/telemetry';
import { nextClaimWrittenThenUnanswered } from '../../../integration-tests/support/written-claim';
import { idempotentEachMessage, type KafkaIdempotencyEvents, PartitionPausedError } from '../src';
import { FakeConsumer, FakeProducer, message, messagePayload } from './fakes';

function setup(options: Record<string, unknown> = {}) {
  const store = new MemoryIdempotencyStore();
  const idempotency = new Idempotency({ store, logger: false }, { leaseMs: 1000, maxAttempts: 2 });
  const consumer = new FakeConsumer();
  const producer = new FakeProducer();
  const events: { type: keyof KafkaIdempotencyEvents; [field: string]: unknown }[] = [];
  const runs: string[] = [];
  let fail: (key: string | undefined, attempt: number) => Error | undefined = () => undefined;
  const eachMessage = idempotentEachMessage(
    { idempotency, consumer, producer, logger: false },
    { groupId: 'g', retryBackoff: { baseMs: 5, jitter: 'none' }, ...options },
    ({ key, attempt, outcome }) => {
      runs.push(`${key}#${attempt}${outcome === 'UNPROTECTED' ? ' unprotected' : ''}`);
      const error = fail(key, attempt);
      if (error) throw error;
      return key;
    },
  );
  // The events these tests look at.
  const names = ['settled', 'retryScheduled', 'missingKey', 'storeUnavailable', 'storeRecovered'] as const;
  for (const type of names) {
    eachMessage.events.on(type, (payload: object) => events.push({ type, ...payload }));
  }
  return {
    store,
    idempotency,
    consumer,
    producer,
    events,
    runs,
    eachMessage,
    failWith: (f: typeof fail) => {
      fail = f;
    },
  };
}

describe('idempotentEachMessage', () => {
  it('runs a key once and returns for its duplicates', async () => {
    const t = setup();
    await t.eachMessage(messagePayload('pay', 0, message(0, 'a', { 'idempotency-key': 'k1' })));
    await t.eachMessage(messagePayload('pay', 1, message(7, 'a', { 'idempotency-key': 'k1' })));
    expect(t.runs).toEqual(['k1#1']);
    expect(await t.store.get({ scope: 'g/pay', key: 'k1' })).toMatchObject({ state: 'COMPLETED' });
  });

  it('falls back to topic/partition/offset when there is no idempotency-key header', async () => {
    const t = setup();
    await t.eachMessage(messagePayload('pay', 2, message(41, 'x')));
    expect(t.runs).toEqual(['pay/2/41#1']);
  });

  it('retries inline, then dead-letters with the error headers and returns', async () => {
    const t = setup();
    t.failWith((_, attempt) => new TypeError(`boom ${attempt}`));
    await t.eachMessage(messagePayload('pay', 0, message(3, 'v', { 'idempotency-key': 'k' })));
    expect(t.runs).toEqual(['k#1', 'k#2']);
    expect(t.producer.sent).toHaveLength(1);
    const [sent] = t.producer.sent;
    expect(sent!.topic).toBe('pay.dlq');
    expect(sent!.messages[0]!.headers).toMatchObject({
      'idempotency-key': 'k',
      'x-idempotency-dead-letter-reason': 'attempts-exhausted',
      'x-idempotency-outcome': 'ACQUIRED',
      'x-idempotency-attempt': '2',
      'x-idempotency-error': 'TypeError: boom 2',
      'x-original-topic': 'pay',
      'x-original-partition': '0',
      'x-original-offset': '3',
    });
  });

  it('pauses the partition and throws a retryable PartitionPausedError (never the TypeError) for a long backoff', async () => {
    const t = setup({ maxInlineDelayMs: 0, retryBackoff: { baseMs: 60_000, jitter: 'none' } });
    t.failWith(() => new TypeError('flaky'));
    const error = await t.eachMessage(messagePayload('pay', 3, message(0, 'v'))).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(PartitionPausedError);
    expect(error).toMatchObject({ retriable: true, name: 'PartitionPausedError', delayMs: 60_000 });
    expect(t.consumer.calls).toEqual([{ method: 'pause', topics: [{ topic: 'pay', partitions: [3] }] }]);
    t.eachMessage.close();
  });

  it('dead-letters a non-retryable error at the first attempt', async () => {
    const t = setup();
    t.failWith(() => new NonRetryableError('declined'));
    await t.eachMessage(messagePayload('pay', 0, message(0, 'v')));
    expect(t.runs).toHaveLength(1);
    expect(t.producer.sent[0]!.messages[0]!.headers).toMatchObject({ 'x-idempotency-attempt': '1' });
  });

  it('waits for a conflicting holder, then pauses without resolving', async () => {
    const t = setup({ conflictWaitMs: 30 });
    await t.store.claim({ scope: 'g/pay', key: 'held' }, { leaseMs: 60_000, retentionMs: 60_000 });
    const error = await t
      .eachMessage(messagePayload('pay', 0, message(0, 'v', { 'idempotency-key': 'held' })))
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(PartitionPausedError);
    expect(t.runs).toEqual([]);
    // Paused for min(remaining lease 60 s, maxConflictDelayMs 5 s), not for the whole lease.
    expect(t.events).toContainEqual(
      expect.objectContaining({
        type: 'retryScheduled',
        reason: 'conflict',
        paused: true,
        delayMs: 5000,
        source: { topic: 'pay', partition: 0, offset: '0' },
      }),
    );
    t.eachMessage.close();
  });

  it('a CONFLICT settles as soon as the holder completes: DUPLICATE, offset resolved, nothing paused', async () => {
    const t = setup({ conflictWaitMs: 5000 });
    const held = await t.store.claim(
      { scope: 'g/pay', key: 'held' },
      { leaseMs: 60_000, retentionMs: 60_000 },
    );
    if (held.outcome !== 'ACQUIRED') throw new Error(held.outcome);
    const delivered = t.eachMessage(messagePayload('pay', 0, message(0, 'v', { 'idempotency-key': 'held' })));
    await new Promise((r) => setTimeout(r, 20));
    const started = performance.now();
    await t.store.complete({ scope: 'g/pay', key: 'held' }, held.fencingToken, { retentionMs: 60_000 });
    await delivered; // resolves: KafkaJS resolves the offset
    expect(performance.now() - started).toBeLessThan(1000);
    expect(t.runs).toEqual([]);
    expect(t.events.filter((e) => e.type === 'retryScheduled')).toEqual([]);
    expect(t.events).toContainEqual(
      expect.objectContaining({
        type: 'settled',
        decision: expect.objectContaining({ action: 'resolve', reason: 'duplicate' }),
        key: 'held',
      }),
    );
    t.eachMessage.close();
  });

  it('pauses (without resolving) when the dead-letter produce fails', async () => {
    const t = setup();
    t.failWith(() => new NonRetryableError('declined'));
    t.producer.failNext = true;
    const error = await t.eachMessage(messagePayload('pay', 0, message(0, 'v'))).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(PartitionPausedError);
    expect(t.events).toContainEqual(
      expect.objectContaining({ type: 'retryScheduled', reason: 'dead-letter-failed', paused: true }),
    );
    // Redelivered: the record is FAILED, so it is dead-lettered without running again.
    await t.eachMessage(messagePayload('pay', 0, message(0, 'v')));
    expect(t.runs).toHaveLength(1);
    expect(t.producer.sent).toHaveLength(1);
    t.eachMessage.close();
  });

  it('fails closed when the store does not answer: pauses the topic until a ping succeeds', async () => {
    const t = setup({ maxInlineDelayMs: 0, storeProbeBackoff: { baseMs: 5, maxMs: 5 } });
    const { StoreUnavailableError } = await import('@idempotent-consumer/core');
    let down = true;
    const claim = t.store.claim.bind(t.store);
    jest
      .spyOn(t.store, 'claim')
      .mockImplementation((...a) => (down ? Promise.reject(new StoreUnavailableError('down')) : claim(...a)));
    jest.spyOn(t.store, 'ping').mockImplementation(async () => {
      if (down) throw new StoreUnavailableError('down');
    });
    const error = await t.eachMessage(messagePayload('pay', 1, message(0, 'v'))).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(PartitionPausedError);
    expect(t.consumer.calls).toEqual([{ method: 'pause', topics: [{ topic: 'pay' }] }]);
    down = false;
    await new Promise((r) => setTimeout(r, 50));
    expect(t.consumer.calls[1]).toEqual({ method: 'resume', topics: [{ topic: 'pay' }] });
    expect(t.runs).toEqual([]);
    expect(t.events).toContainEqual(expect.objectContaining({ type: 'storeUnavailable', topic: 'pay' }));
    expect(t.events).toContainEqual(expect.objectContaining({ type: 'storeRecovered', topics: ['pay'] }));
  });

  it('an extension the store does not answer before the handler (its lease ran out) runs nothing and pauses the topic until a ping answers', async () => {
    const t = setup({ maxInlineDelayMs: 0, storeProbeBackoff: { baseMs: 5, maxMs: 5, jitter: 'none' } });
    const { StoreUnavailableError } = await import('@idempotent-consumer/core');
    let down = true;
    const claim = t.store.claim.bind(t.store);
    // The claim's lease has run out by the time the handler would start: execute extends it first.
    jest.spyOn(t.store, 'claim').mockImplementation(async (...a) => {
      const reply = await claim(...a);
      return reply.outcome === 'ACQUIRED' ? { ...reply, leaseExpiresAtMs: reply.serverTimeMs } : reply;
    });
    const extend = t.store.extend.bind(t.store);
    jest
      .spyOn(t.store, 'extend')
      .mockImplementation((...a) =>
        down ? Promise.reject(new StoreUnavailableError('down')) : extend(...a),
      );
    jest.spyOn(t.store, 'ping').mockImplementation(async () => {
      if (down) throw new StoreUnavailableError('down');
    });
    const storeErrors: string[] = [];
    t.eachMessage.events.on('storeError', (e) => storeErrors.push(e.operation));
    const error = await t.eachMessage(messagePayload('pay', 1, message(0, 'v'))).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(PartitionPausedError);
    expect(t.runs).toEqual([]);
    expect(storeErrors).toEqual([]);
    expect(t.consumer.calls).toEqual([{ method: 'pause', topics: [{ topic: 'pay' }] }]);
    expect(t.events.filter((e) => e.type === 'storeUnavailable')).toHaveLength(1);
    const recovered = new Promise((resolve) => t.eachMessage.events.once('storeRecovered', resolve));
    down = false;
    await recovered;
    expect(t.consumer.calls[1]).toEqual({ method: 'resume', topics: [{ topic: 'pay' }] });
    t.eachMessage.close();
  });

  it('counts each ping against maxInlineDelayMs: a hanging ping does not stretch the inline wait', async () => {
    const t = setup({ maxInlineDelayMs: 200, storeProbeBackoff: { baseMs: 10, maxMs: 10 } });
    const { StoreUnavailableError } = await import('@idempotent-consumer/core');
    jest.spyOn(t.store, 'claim').mockRejectedValue(new StoreUnavailableError('down'));
    // Each ping hangs for 5 s, like a command timeout of a store that does not answer.
    jest
      .spyOn(t.store, 'ping')
      .mockImplementation(
        () => new Promise((_, reject) => setTimeout(() => reject(new Error('t')), 5000).unref()),
      );
    const started = performance.now();
    const error = await t.eachMessage(messagePayload('pay', 1, message(0, 'v'))).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(PartitionPausedError);
    expect(performance.now() - started).toBeLessThan(2000);
    t.eachMessage.close();
  });

  it('missingKey: process runs the handler UNPROTECTED with no key, and dead-letters after maxAttempts runs', async () => {
    const t = setup({ idempotencyKey: () => undefined, missingKey: 'process' });
    t.failWith(() => new Error('flaky'));
    await t.eachMessage(messagePayload('pay', 0, message(0, 'v')));
    expect(t.runs).toEqual(['undefined#1 unprotected', 'undefined#2 unprotected']);
    expect(t.events).toContainEqual(expect.objectContaining({ type: 'missingKey', action: 'process' }));
    expect(t.producer.sent[0]!.messages[0]!.headers).toMatchObject({
      'x-idempotency-dead-letter-reason': 'attempts-exhausted',
      'x-idempotency-outcome': 'UNPROTECTED',
      'x-idempotency-attempt': '2',
    });
    expect(t.events).toContainEqual(
      expect.objectContaining({
        type: 'settled',
        decision: expect.objectContaining({ action: 'dead-letter' }),
        outcome: 'UNPROTECTED',
      }),
    );
  });

  it('missingKey: process counts runs across partition pauses', async () => {
    const t = setup({
      idempotencyKey: () => undefined,
      missingKey: 'process',
      maxInlineDelayMs: 0,
      retryBackoff: { baseMs: 60_000, jitter: 'none' },
    });
    t.failWith(() => new Error('flaky'));
    const payload = messagePayload('pay', 0, message(5, 'v'));
    expect(await t.eachMessage(payload).catch((e: unknown) => e)).toBeInstanceOf(PartitionPausedError);
    await t.eachMessage(payload);
    expect(t.runs).toEqual(['undefined#1 unprotected', 'undefined#2 unprotected']);
    expect(t.producer.sent).toHaveLength(1);
    t.eachMessage.close();
  });

  it("fails open under the runner's storeFailureMode 'open': the handler gets the real key, UNPROTECTED", async () => {
    const store = new MemoryIdempotencyStore();
    const { StoreUnavailableError } = await import('@idempotent-consumer/core');
    jest.spyOn(store, 'claim').mockRejectedValue(new StoreUnavailableError('down'));
    const idempotency = new Idempotency({ store, logger: false }, { storeFailureMode: 'open' });
    const seen: unknown[] = [];
    const eachMessage = idempotentEachMessage(
      { idempotency, consumer: new FakeConsumer(), producer: new FakeProducer(), logger: false },
      { groupId: 'g' },
      ({ key, outcome, fencingToken }) => {
        seen.push({ key, outcome, fencingToken });
      },
    );
    await eachMessage(messagePayload('pay', 0, message(0, 'v', { 'idempotency-key': 'k9' })));
    expect(seen).toEqual([{ key: 'k9', outcome: 'UNPROTECTED', fencingToken: 0 }]);
  });

  it('rejects a missing key by default and dead-letters it', async () => {
    const t = setup({ idempotencyKey: () => undefined });
    await t.eachMessage(messagePayload('pay', 0, message(0, 'v')));
    expect(t.runs).toEqual([]);
    expect(t.producer.sent[0]!.messages[0]!.headers).toMatchObject({
      'x-idempotency-dead-letter-reason': 'missing-key',
      'x-idempotency-outcome': 'NONE',
    });
    expect(t.events).toContainEqual(expect.objectContaining({ type: 'missingKey', action: 'dead-letter' }));
  });

  it('a throwing listener does not change what Kafka sees', async () => {
    const t = setup();
    t.eachMessage.events.on('settled', () => {
      throw new Error('listener bug');
    });
    await t.eachMessage(messagePayload('pay', 0, message(0, 'a', { 'idempotency-key': 'k1' })));
    expect(t.runs).toEqual(['k1#1']);
  });

  it('checks its options', () => {
    const idempotency = new Idempotency({ store: new MemoryIdempotencyStore(), logger: false });
    const consumer = new FakeConsumer();
    expect(() =>
      idempotentEachMessage({ idempotency, consumer }, { deadLetterTopic: false }, () => {}),
    ).toThrow(InvalidOptionError);
    expect(() => idempotentEachMessage({ idempotency, consumer }, { groupId: 'g' }, () => {})).toThrow(
      /producer/,
    );
  });
});

describe('idempotentEachMessage failure paths', () => {
  it('an unprotected run whose dead-letter produce fails is not run again: the re-fetch sends the copy', async () => {
    const t = setup({ idempotencyKey: () => undefined, missingKey: 'process' });
    t.failWith(() => new NonRetryableError('bad'));
    t.producer.failNext = true;
    const payload = messagePayload('pay', 0, message(7, 'v'));
    expect(await t.eachMessage(payload).catch((e: unknown) => e)).toBeInstanceOf(PartitionPausedError);
    await t.eachMessage(payload); // KafkaJS re-fetches the unresolved offset
    expect(t.runs).toEqual(['undefined#1 unprotected']);
    expect(t.producer.sent).toHaveLength(1);
    expect(t.producer.sent[0]!.messages[0]!.headers).toMatchObject({
      'x-idempotency-dead-letter-reason': 'non-retryable',
    });
    t.eachMessage.close();
  });

  it('a fingerprint that throws dead-letters the message as invalid-key with an invalidKey event (an InvalidPayloadError)', async () => {
    const t = setup({
      fingerprint: () => {
        throw new Error('unparsable');
      },
    });
    const invalid: unknown[] = [];
    t.eachMessage.events.on('invalidKey', (e) => invalid.push(e.error));
    await t.eachMessage(messagePayload('pay', 0, message(0, 'v', { 'idempotency-key': 'k' })));
    expect(t.runs).toEqual([]);
    expect(invalid).toHaveLength(1);
    expect((invalid[0] as Error).name).toBe('InvalidPayloadError');
    expect(t.producer.sent[0]!.messages[0]!.headers).toMatchObject({
      'x-idempotency-dead-letter-reason': 'invalid-key',
    });
  });

  it('a completion write refused with LEASE_LOST after an outage emits leaseLost (during write) and resolves', async () => {
    const { StoreUnavailableError } = await import('@idempotent-consumer/core');
    const store = new MemoryIdempotencyStore();
    const idempotency = new Idempotency({ store, logger: false }, { leaseMs: 1000, writeAttempts: 1 });
    const eachMessage = idempotentEachMessage(
      { idempotency, consumer: new FakeConsumer(), producer: new FakeProducer(), logger: false },
      { groupId: 'g', storeProbeBackoff: { baseMs: 1, maxMs: 1, jitter: 'none' } },
      () => 'done',
    );
    const complete = jest
      .spyOn(store, 'complete')
      .mockRejectedValueOnce(new StoreUnavailableError('down'))
      .mockResolvedValueOnce({ ok: false, state: 'IN_PROGRESS', currentFencingToken: 999 } as never);
    const lost: unknown[] = [];
    eachMessage.events.on('leaseLost', (e) => lost.push(e.during));
    await eachMessage(messagePayload('pay', 0, message(0, 'v', { 'idempotency-key': 'k' })));
    expect(complete).toHaveBeenCalledTimes(2);
    expect(lost).toEqual(['write']);
    eachMessage.close();
  });

  it('a completion write while the store stays down ends when the wrapper closes, leaving the offset unresolved', async () => {
    const { StoreUnavailableError } = await import('@idempotent-consumer/core');
    const store = new MemoryIdempotencyStore();
    const idempotency = new Idempotency({ store, logger: false }, { leaseMs: 1000, writeAttempts: 1 });
    const eachMessage = idempotentEachMessage(
      { idempotency, consumer: new FakeConsumer(), producer: new FakeProducer(), logger: false },
      { groupId: 'g', storeProbeBackoff: { baseMs: 5, maxMs: 5, jitter: 'none' } },
      () => 'done',
    );
    jest.spyOn(store, 'complete').mockRejectedValue(new StoreUnavailableError('down'));
    jest.spyOn(store, 'ping').mockRejectedValue(new StoreUnavailableError('down'));
    const unavailable = new Promise((resolve) => eachMessage.events.once('storeUnavailable', resolve));
    const settled: unknown[] = [];
    eachMessage.events.on('settled', (e) => settled.push(e));
    const running = eachMessage(messagePayload('pay', 0, message(0, 'v', { 'idempotency-key': 'k' })));
    const outcome = running.then(
      () => 'resolved',
      (e: unknown) => e,
    );
    await unavailable;
    eachMessage.close();
    expect(await outcome).toBeInstanceOf(PartitionPausedError);
    expect(settled).toEqual([]);
  });
});

describe('idempotentEachMessage telemetry', () => {
  /**
   * Runs one message that ends as a store error: expects the PartitionPausedError, one `storeError`
   * (`process`), the partition paused, and one `pause` on its span (status ERROR) and in the metrics.
   * Closes the wrapper and the SDK; returns the spans.
   */
  async function expectPausedOnStoreError(t: ReturnType<typeof setup>, sdk: TelemetrySdk) {
    const storeErrors: string[] = [];
    t.eachMessage.events.on('storeError', (e) => storeErrors.push(e.operation));
    const error = await t
      .eachMessage(messagePayload('pay', 0, message(0, 'v', { 'idempotency-key': 'k' })))
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(PartitionPausedError);
    expect(storeErrors).toEqual(['process']);
    expect(t.consumer.calls).toEqual([{ method: 'pause', topics: [{ topic: 'pay', partitions: [0] }] }]);
    const spans = sdk.spans('process pay');
    expect(spans.map((s) => s.attributes['idempotency.broker_action'])).toEqual(['pause']);
    expect(spans[0]!.status.code).toBe(2); // SpanStatusCode.ERROR
    expect(await sdk.counts('idempotency.broker_actions', 'idempotency.broker_action')).toEqual({ pause: 1 });
    t.eachMessage.close();
    await sdk.close();
    return spans;
  }

  it('a store error the processing throws pauses the partition: one pause in idempotency.broker_actions and on the span (status ERROR)', async () => {
    const { StoreUnavailableError } = await import('@idempotent-consumer/core');
    const sdk = new TelemetrySdk();
    const { tracerProvider, meterProvider } = sdk;
    const t = setup({ telemetry: { tracerProvider, meterProvider } });
    // The runner's completion write: unavailable, then a reply it does not understand (thrown to the wrapper).
    jest
      .spyOn(t.store, 'complete')
      .mockRejectedValueOnce(new StoreUnavailableError('down'))
      .mockRejectedValueOnce(new Error('unexpected reply'));
    await expectPausedOnStoreError(t, sdk);
  });

  it('a heartbeat KafkaJS would stop the consumer on, during an inline retry, pauses the partition: one pause on the span', async () => {
    const sdk = new TelemetrySdk();
    const { tracerProvider, meterProvider } = sdk;
    const t = setup({
      maxInlineDelayMs: 1000,
      retryBackoff: { baseMs: 300, jitter: 'none' },
      brokerHeartbeatIntervalMs: 1,
      telemetry: { tracerProvider, meterProvider },
    });
    t.failWith((_, attempt) => (attempt === 1 ? new Error('gateway down') : undefined));
    const payload = {
      ...messagePayload('pay', 0, message(0, 'v', { 'idempotency-key': 'k' })),
      heartbeat: () => Promise.reject(Object.assign(new Error('not retriable'), { retriable: false })),
    };
    const error = await t.eachMessage(payload).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(PartitionPausedError);
    expect(t.consumer.calls).toEqual([{ method: 'pause', topics: [{ topic: 'pay', partitions: [0] }] }]);
    expect(sdk.spans('process pay').map((s) => s.attributes['idempotency.broker_action'])).toEqual(['pause']);
    expect(await sdk.counts('idempotency.broker_actions', 'idempotency.broker_action')).toEqual({
      retry: 1,
      pause: 1,
    });
    t.eachMessage.close();
    await sdk.close();
  });

  it('a `scope` function that throws pauses the partition: a storeError, one pause in idempotency.broker_actions and on the span (no idempotency.scope, status ERROR)', async () => {
    const sdk = new TelemetrySdk();
    const { tracerProvider, meterProvider } = sdk;
    const t = setup({
      scope: () => {
        throw new TypeError('no scope');
      },
      telemetry: { tracerProvider, meterProvider },
    });
    const [span] = await expectPausedOnStoreError(t, sdk);
    expect(t.runs).toEqual([]);
    expect(span!.attributes['idempotency.scope']).toBeUndefined();
  });

  it('a topic paused until the store answers is one pause in idempotency.broker_actions and on the span', async () => {
    const { StoreUnavailableError } = await import('@idempotent-consumer/core');
    const sdk = new TelemetrySdk();
    const { tracerProvider, meterProvider } = sdk;
    const t = setup({
      maxInlineDelayMs: 0,
      storeProbeBackoff: { baseMs: 5, maxMs: 5 },
      telemetry: { tracerProvider, meterProvider },
    });
    jest.spyOn(t.store, 'claim').mockRejectedValue(new StoreUnavailableError('down'));
    jest.spyOn(t.store, 'ping').mockRejectedValue(new StoreUnavailableError('down'));
    const error = await t.eachMessage(messagePayload('pay', 0, message(0, 'v'))).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(PartitionPausedError);
    expect(t.consumer.calls).toEqual([{ method: 'pause', topics: [{ topic: 'pay' }] }]);
    expect(sdk.spans('process pay').map((s) => s.attributes['idempotency.broker_action'])).toEqual(['pause']);
    expect(await sdk.counts('idempotency.broker_actions', 'idempotency.broker_action')).toEqual({ pause: 1 });
    t.eachMessage.close();
    await sdk.close();
  });
});

describe('idempotentEachMessage: a claim the store wrote before it failed, whose give-back went unanswered too (StoreUnavailableError.writtenClaim)', () => {
  /**
   * Makes `t`'s store fail like `RedisIdempotencyStore` with `waitForReplicas` whose `WAIT` (or `start`)
   * and then the runner's own give-back go unanswered: the next `call` applies a claim, then rejects
   * naming it (`before` runs first: {@link nextClaimWrittenThenUnanswered}); `release` and `ping` reject until the adapter emits `storeUnavailable`, when the
   * store comes back.
   */
  async function writtenThenDown(
    t: ReturnType<typeof setup>,
    call: 'claim' | 'waitForOutcome',
    before: () => Promise<unknown> = async () => undefined,
  ) {
    const { StoreUnavailableError } = await import('@idempotent-consumer/core');
    let down = true;
    t.eachMessage.events.once('storeUnavailable', () => {
      down = false;
    });
    const unanswered = () => Promise.reject(new StoreUnavailableError('Connection is closed.'));
    nextClaimWrittenThenUnanswered(t.store, call, { before });
    const release = t.store.release.bind(t.store);
    jest.spyOn(t.store, 'release').mockImplementation((...a) => (down ? unanswered() : release(...a)));
    jest.spyOn(t.store, 'ping').mockImplementation(() => (down ? unanswered() : Promise.resolve()));
  }

  it('of a claim: given back once the store answers, so the message runs at once, as attempt 1 (it met its own claim as a CONFLICT: the partition paused until the lease lapsed)', async () => {
    // conflictWaitMs 0: the old code's CONFLICT paused the partition instead of waiting out the lease.
    const t = setup({
      maxInlineDelayMs: 5000,
      conflictWaitMs: 0,
      storeProbeBackoff: { baseMs: 5, maxMs: 5, jitter: 'none' },
    });
    await writtenThenDown(t, 'claim');
    try {
      await t.eachMessage(messagePayload('pay', 0, message(0, 'v', { 'idempotency-key': 'k' })));
      expect(t.runs).toEqual(['k#1']);
      expect(t.consumer.calls).toEqual([]);
      expect(await t.store.get({ scope: 'g/pay', key: 'k' })).toMatchObject({
        state: 'COMPLETED',
        attempt: 1,
      });
    } finally {
      t.eachMessage.close();
    }
  });

  it("of a CONFLICT wait's claim: given back once the store answers, so the message runs at once, as attempt 1", async () => {
    const t = setup({
      maxInlineDelayMs: 5000,
      conflictWaitMs: 1000,
      storeProbeBackoff: { baseMs: 5, maxMs: 5, jitter: 'none' },
    });
    const id = { scope: 'g/pay', key: 'k' };
    // Another worker holds the key; it gives it back as the wait begins, and the wait's claim takes it.
    const holder = await t.store.claim(id, { leaseMs: 60_000, retentionMs: 60_000, reserve: true });
    if (holder.outcome !== 'ACQUIRED') throw new Error(`holder: ${holder.outcome}`);
    const release = t.store.release.bind(t.store);
    await writtenThenDown(t, 'waitForOutcome', () =>
      release(id, holder.fencingToken, { retentionMs: 60_000, neverStarted: true }),
    );
    try {
      await t.eachMessage(messagePayload('pay', 0, message(0, 'v', { 'idempotency-key': 'k' })));
      expect(t.runs).toEqual(['k#1']);
      expect(t.consumer.calls).toEqual([]);
      expect(await t.store.get(id)).toMatchObject({ state: 'COMPLETED', attempt: 1 });
    } finally {
      t.eachMessage.close();
    }
  });

  it("failing open: given back (one try) before the runner's claim, which then runs the message claimed, as attempt 1 (it met its own claim as a CONFLICT: the partition paused)", async () => {
    const { StoreUnavailableError } = await import('@idempotent-consumer/core');
    const store = new MemoryIdempotencyStore();
    const idempotency = new Idempotency(
      { store, logger: false },
      { leaseMs: 1000, storeFailureMode: 'open' },
    );
    nextClaimWrittenThenUnanswered(store);
    // The runner's own give-back goes unanswered; the store answers from then on.
    jest.spyOn(store, 'release').mockRejectedValueOnce(new StoreUnavailableError('Connection is closed.'));
    const seen: string[] = [];
    const eachMessage = idempotentEachMessage(
      { idempotency, consumer: new FakeConsumer(), producer: new FakeProducer(), logger: false },
      { groupId: 'g', conflictWaitMs: 0 },
      ({ key, outcome, attempt }) => {
        seen.push(`${key} ${outcome} #${attempt}`);
      },
    );
    try {
      await eachMessage(messagePayload('pay', 0, message(0, 'v', { 'idempotency-key': 'k' })));
      expect(seen).toEqual(['k ACQUIRED #1']);
      expect(await store.get({ scope: 'g/pay', key: 'k' })).toMatchObject({ state: 'COMPLETED', attempt: 1 });
    } finally {
      eachMessage.close();
    }
  });
});
