import { Idempotency, MemoryIdempotencyStore } from '../../src';
import { AdapterLog, type MessageEnd, MessagePipeline, type MessagePort, StoreGate } from '../../src/kit';
import { NOOP_MESSAGE_SPAN } from '../../src/kit/telemetry/message-span';

/** A port with none of the optional hooks (no `keepAlive`), whose `carryOut` hands back the end. */
function bareport(): MessagePort<string, MessageEnd<unknown>> {
  return {
    scopeOf: () => 's',
    keyOf: (key) => key,
    payloadOf: () => undefined,
    handlerFields: () => ({}),
    subject: (_, fields) => fields,
    storeError: () => ({}),
    warningWords: () => ({ where: '', keySource: '', advice: '', unacknowledged: '', deadLetter: () => '' }),
    emit: () => {},
    deliveryId: (key) => key,
    carryOut: async (_, end) => ({ done: true, result: end }),
  };
}

describe('MessagePipeline: the wait for a conflicting holder', () => {
  it('ends when the consumer stops, also for a port without keepAlive', async () => {
    const store = new MemoryIdempotencyStore();
    const idempotency = new Idempotency({ store, logger: false }, { leaseMs: 30_000 });
    const stopping = new AbortController();
    const pipeline = new MessagePipeline<string, unknown, MessageEnd<unknown>>({
      idempotency,
      handler: () => undefined,
      port: bareport(),
      gate: new StoreGate(store),
      log: AdapterLog.silent,
      telemetry: { start: () => NOOP_MESSAGE_SPAN },
      stopping: stopping.signal,
      options: {
        missingKey: 'dead-letter',
        overrides: { conflictWaitMs: 20_000 },
        policy: { retryBackoff: {}, maxConflictDelayMs: 5000, maxAttempts: 3, isRetryable: () => true },
      },
    });
    await idempotency.claim({ scope: 's', key: 'k' }); // another worker holds the key
    const started = performance.now();
    const processing = pipeline.process('k', pipeline.prepare('k'));
    setTimeout(() => stopping.abort(), 50);
    const end = await processing;
    expect(performance.now() - started).toBeLessThan(5000);
    expect(end.decision).toMatchObject({ action: 'retry', reason: 'conflict' });
  });
});
