import { setTimeout as tick } from 'node:timers/promises';
import type { RabbitMqIdempotencyEvents } from '../src/events';
import { deliveryPortFixture } from './delivery-port-fixture';

/**
 * A bug inside the adapter (here: `admission()` throws) must not turn into a hot redelivery loop: the
 * delivery is requeued after the shortest delay tier, as `requeueLater` does for a store error.
 */
describe('DeliveryPort: an adapter bug (internal-error)', () => {
  it('requeues after the shortest delay tier, not at once', async () => {
    const settled: RabbitMqIdempotencyEvents['settled'][0][] = [];
    const emit = ((name: string, payload: never) => {
      if (name === 'settled') settled.push(payload);
    }) as never;
    const { port, channel, stop, nacked, message } = deliveryPortFixture({
      delayTiersMs: [60_000],
      emit,
      admission: () => {
        throw new Error('a bug in the adapter');
      },
    });
    const delivery = message('k');

    const processing = port.process(delivery, channel);
    await tick(50);
    expect(nacked).toEqual([]); // not requeued at once: it waits for the 60 s tier
    stop.abort(); // the consumer stops: the wait ends early, the delivery is requeued
    await processing;
    expect(nacked).toEqual([delivery]);
    expect(settled.map((e) => e.decision)).toEqual([{ action: 'requeue', reason: 'internal-error' }]);
  });
});
