import { setTimeout as tick } from 'node:timers/promises';
import { Idempotency, MemoryIdempotencyStore } from '@idempotent-consumer/core';
import { AdapterLog } from '@idempotent-consumer/core/kit';
import type { ConsumeChannel } from '../src/amqp-types';
import { DeliveryAcks } from '../src/delivery-acks';
import { DeliveryProcessor } from '../src/delivery-processor';
import type { IdempotentConsumerEvents } from '../src/events';
import { KeyPolicy } from '../src/key-policy';
import { resolveConsumerOptions } from '../src/options';
import { Settler } from '../src/settler';
import { consumerTelemetry } from '../src/telemetry';
import { consumerTopology } from '../src/topology';

/**
 * A bug inside the adapter (here: `admission()` throws) must not turn into a hot redelivery loop: the
 * delivery is requeued after the shortest delay tier, as `requeueLater` does for a store error.
 */
describe('DeliveryProcessor: an adapter bug (internal-error)', () => {
  it('requeues after the shortest delay tier, not at once', async () => {
    const options = resolveConsumerOptions({ queue: 'work', delayTiersMs: [60_000] }, 1000);
    const stop = new AbortController();
    const settled: IdempotentConsumerEvents['settled'][0][] = [];
    const emit = ((name: string, payload: never) => {
      if (name === 'settled') settled.push(payload);
    }) as never;
    const nacked: unknown[] = [];
    const channel = { ack: () => {}, nack: (m: unknown) => nacked.push(m) } as unknown as ConsumeChannel;
    const acks = new DeliveryAcks(channel);
    const settler = new Settler({
      topology: consumerTopology(options),
      publisher: () => Promise.reject(new Error('not used')),
      acks: () => acks,
      requeueAfterMs: options.delayTiersMs[0]!,
      signal: stop.signal,
      abandoned: () => false,
      emit,
      markDeadLettered: async () => {},
    });
    const processor = new DeliveryProcessor<unknown>({
      idempotency: new Idempotency({ store: new MemoryIdempotencyStore(), logger: false }),
      handler: () => {},
      options,
      keyPolicy: new KeyPolicy(options.idempotencyKey, options.missingKey),
      policy: { delayTiersMs: options.delayTiersMs, retryBackoff: options.retryBackoff, maxAttempts: 3 },
      runOptions: {},
      abandoning: new AbortController().signal,
      settler,
      admission: () => {
        throw new Error('a bug in the adapter');
      },
      storeUnavailable: () => {},
      emit,
      log: AdapterLog.silent,
      telemetry: consumerTelemetry('work', undefined),
    } as never);
    const message = {
      content: Buffer.from('{}'),
      fields: { deliveryTag: 1, redelivered: false, exchange: '', routingKey: 'work', consumerTag: 'c' },
      properties: { headers: {}, messageId: 'k' },
    } as never;

    const processing = processor.process(message, channel);
    await tick(50);
    expect(nacked).toEqual([]); // not requeued at once: it waits for the 60 s tier
    stop.abort(); // the consumer stops: the wait ends early, the delivery is requeued
    await processing;
    expect(nacked).toEqual([message]);
    expect(settled.map((e) => e.decision)).toEqual([{ action: 'requeue', reason: 'internal-error' }]);
  });
});
