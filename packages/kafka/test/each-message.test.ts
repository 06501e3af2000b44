import {
  Idempotency,
  InvalidOptionError,
  MemoryIdempotencyStore,
  NonRetryableError,
} from '@idempotent-consumer/core';
import { idempotentEachMessage, type KafkaIdempotencyEvent, PartitionPausedError } from '../src';
import { FakeConsumer, FakeProducer, message, messagePayload } from './fakes';

function setup(options: Record<string, unknown> = {}) {
  const store = new MemoryIdempotencyStore();
  const idempotency = new Idempotency({ store }, { leaseMs: 1000, maxAttempts: 2 });
  const consumer = new FakeConsumer();
  const producer = new FakeProducer();
  const events: KafkaIdempotencyEvent[] = [];
  const runs: string[] = [];
  let fail: (key: string, attempt: number) => Error | undefined = () => undefined;
  const eachMessage = idempotentEachMessage(
    { idempotency, consumer, producer },
    { groupId: 'g', retryBackoff: { baseMs: 5, jitter: 'none' }, onEvent: (e) => events.push(e), ...options },
    ({ key, attempt }) => {
      runs.push(`${key}#${attempt}`);
      const error = fail(key, attempt);
      if (error) throw error;
      return key;
    },
  );
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
    const t = setup({ conflictWaitMs: 30, conflictPollIntervalMs: 10 });
    await t.store.claim({ scope: 'g/pay', key: 'held' }, { leaseMs: 60_000, retentionMs: 60_000 });
    const error = await t
      .eachMessage(messagePayload('pay', 0, message(0, 'v', { 'idempotency-key': 'held' })))
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(PartitionPausedError);
    expect(t.runs).toEqual([]);
    expect(t.events.filter((e) => e.type === 'waiting' && e.reason === 'conflict')).toHaveLength(3);
    expect(t.events).toContainEqual(
      expect.objectContaining({ type: 'paused', reason: 'conflict', partition: 0 }),
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
      expect.objectContaining({ type: 'paused', reason: 'dead-letter-failed' }),
    );
    // Redelivered: the record is FAILED, so it is dead-lettered without running again.
    await t.eachMessage(messagePayload('pay', 0, message(0, 'v')));
    expect(t.runs).toHaveLength(1);
    expect(t.producer.sent).toHaveLength(1);
    t.eachMessage.close();
  });

  it('fails closed when the store does not answer: pauses the topic until a ping succeeds', async () => {
    const t = setup({ maxInlineDelayMs: 0, storeProbeIntervalMs: 5 });
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
  });

  it('rejects a missing key by default and dead-letters it', async () => {
    const t = setup({ key: () => undefined });
    await t.eachMessage(messagePayload('pay', 0, message(0, 'v')));
    expect(t.runs).toEqual([]);
    expect(t.producer.sent[0]!.messages[0]!.headers).toMatchObject({
      'x-idempotency-dead-letter-reason': 'missing-key',
      'x-idempotency-outcome': 'NONE',
    });
  });

  it('checks its options', () => {
    const idempotency = new Idempotency({ store: new MemoryIdempotencyStore() });
    const consumer = new FakeConsumer();
    expect(() =>
      idempotentEachMessage({ idempotency, consumer }, { deadLetterTopic: false }, () => {}),
    ).toThrow(InvalidOptionError);
    expect(() => idempotentEachMessage({ idempotency, consumer }, { groupId: 'g' }, () => {})).toThrow(
      /producer/,
    );
  });
});
