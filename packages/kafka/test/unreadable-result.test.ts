import {
  Idempotency,
  type IdempotencyStore,
  MemoryIdempotencyStore,
  UnreadableResultError,
} from '@idempotent-consumer/core';
import { idempotentEachBatch, idempotentEachMessage } from '../src';
import { batchPayload, FakeConsumer, FakeProducer, message, messagePayload } from './fakes';

/**
 * A key COMPLETED with a stored result this version cannot decode: an encoding a newer version wrote
 * (met during a rolling upgrade).
 */
async function completedUnreadable(store: IdempotencyStore, key: string): Promise<void> {
  const id = { scope: 'g/pay', key };
  const claim = await store.claim(id, { leaseMs: 60_000, retentionMs: 60_000 });
  if (claim.outcome !== 'ACQUIRED') throw new Error(claim.outcome);
  await store.complete(id, claim.fencingToken, { retentionMs: 60_000, result: 'x{"v":2}' });
}

function setup() {
  const store = new MemoryIdempotencyStore();
  const idempotency = new Idempotency({ store, logger: false }, { leaseMs: 1000, maxAttempts: 3 });
  const consumer = new FakeConsumer();
  const runs: string[] = [];
  const handler = ({ key }: { key: string | undefined }) => {
    runs.push(key ?? '');
  };
  const dependencies = { idempotency, consumer, producer: new FakeProducer(), logger: false } as const;
  const options = { groupId: 'g', retryBackoff: { baseMs: 60_000, jitter: 'none' } } as const;
  return {
    store,
    consumer,
    runs,
    eachMessage: idempotentEachMessage(dependencies, { ...options, maxInlineDelayMs: 0 }, handler),
    eachBatch: idempotentEachBatch(dependencies, { ...options, maxInlineDelayMs: 0 }, handler),
  };
}

const keyed = (offset: number, key: string) => message(offset, key, { 'idempotency-key': key });

describe('Kafka: a DUPLICATE whose stored result this version cannot decode', () => {
  it('eachMessage resolves it as a DUPLICATE (settled, storeError), without running the handler or pausing', async () => {
    const t = setup();
    await completedUnreadable(t.store, 'newer');
    const settled: unknown[] = [];
    const storeErrors: { operation: string; error: unknown }[] = [];
    t.eachMessage.events.on('settled', (e) => settled.push(e));
    t.eachMessage.events.on('storeError', (e) => storeErrors.push(e));
    // Resolves (KafkaJS then resolves the offset); the old code threw PartitionPausedError.
    await t.eachMessage(messagePayload('pay', 0, keyed(0, 'newer')));
    expect(t.runs).toEqual([]);
    expect(settled).toEqual([
      expect.objectContaining({
        key: 'newer',
        outcome: 'DUPLICATE',
        attempt: 1,
        decision: expect.objectContaining({ action: 'resolve', reason: 'duplicate' }),
      }),
    ]);
    expect(storeErrors).toEqual([
      expect.objectContaining({ operation: 'settle', error: expect.any(UnreadableResultError) }),
    ]);
    expect(t.consumer.calls).toEqual([]);
    t.eachMessage.close();
  });

  it('eachBatch resolves its offset as a DUPLICATE and goes on with the batch', async () => {
    const t = setup();
    await completedUnreadable(t.store, 'newer');
    const storeErrors: { operation: string; error: unknown }[] = [];
    t.eachBatch.events.on('storeError', (e) => storeErrors.push(e));
    const payload = batchPayload('pay', 0, [keyed(0, 'a'), keyed(1, 'newer'), keyed(2, 'c')]);
    await t.eachBatch(payload);
    expect(payload.resolved).toEqual(['0', '1', '2']);
    expect(t.runs).toEqual(['a', 'c']);
    expect(storeErrors).toEqual([
      expect.objectContaining({ operation: 'settle', error: expect.any(UnreadableResultError) }),
    ]);
    expect(t.consumer.calls).toEqual([]);
    t.eachBatch.close();
  });
});
