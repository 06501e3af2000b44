import { waitFor } from '../../support/net';
import { describeWithServices } from '../../support/service';
import { acks, NatsFixture } from './fixture';

jest.setTimeout(60_000);

describeWithServices(['nats', 'redis'], 'nats adapter: stop() with handlers in flight', (urls) => {
  const fx = NatsFixture.eachTest(urls);

  it('waits for the handlers in flight and acks them, naks the pulled ones it did not start, and starts none after stop()', async () => {
    let release!: () => void;
    const released = new Promise<void>((resolve) => {
      release = resolve;
    });
    const started: { key: string; afterStop: boolean }[] = [];
    let stopping = false;
    const { consumer, events } = await fx.consumer(fx.idempotency(), { concurrency: 2 }, async ({ key }) => {
      started.push({ key: key!, afterStop: stopping });
      await released;
      await fx.effect(key!);
    });
    for (let i = 0; i < 6; i++) await fx.publish(`pay-${i}`);
    await waitFor('two handlers running', () => started.length === 2);
    stopping = true;
    const stopped = consumer.stop();
    await new Promise((resolve) => setTimeout(resolve, 200));
    release();
    expect(await stopped).toEqual({ abandoned: 0 });
    expect(started.filter((s) => s.afterStop)).toEqual([]);
    expect(
      acks(events)
        .map((e) => e.key)
        .sort(),
    ).toEqual(started.map((s) => s.key).sort());
    const naks = events.settled.filter((e) => e.decision.action === 'nak');
    expect(naks.map((e) => e.decision)).toEqual(
      naks.map(() => ({ action: 'nak', reason: 'stopping', delayMs: 0 })),
    );
    expect(events.stopped).toEqual([{ stream: fx.stream, consumer: fx.durable, abandoned: 0 }]);

    // Another consumer takes the rest at once (nak'ed without delay, not left to ack_wait).
    const next = await fx.consumer(fx.idempotency(), {}, async ({ key }) => fx.effect(key!));
    await waitFor('the rest acked', () => acks(next.events).length === 4, 1500);
    expect(Object.values(await fx.effects())).toEqual([1, 1, 1, 1, 1, 1]);
  });

  it('abandons a handler still running at stopTimeoutMs: its signal aborts, nothing is acked, and its redelivery meets the outcome it recorded late', async () => {
    let aborted = false;
    let running = false;
    const { consumer, events } = await fx.consumer(
      fx.idempotency(),
      { stopTimeoutMs: 300 },
      async ({ key, signal }) => {
        running = true;
        await new Promise<void>((resolve) =>
          signal.addEventListener('abort', () => resolve(), { once: true }),
        );
        aborted = true;
        await new Promise((resolve) => setTimeout(resolve, 300)); // finishes anyway, ignoring the abort
        await fx.effect(key!);
      },
    );
    await fx.publish('pay-slow');
    await waitFor('the handler running', () => running);
    expect(await consumer.stop()).toEqual({ abandoned: 1 });
    expect(aborted).toBe(true);
    expect(events.settled.map((e) => e.decision)).toEqual([{ action: 'leave', reason: 'abandoned' }]);
    await waitFor(
      'the abandoned handler recorded its outcome',
      async () => (await fx.effects())['pay-slow'] === 1,
    );
    expect(acks(events)).toEqual([]);
    expect((await fx.pending()).ackPending).toBe(1);

    let runs = 0;
    const next = await fx.consumer(fx.idempotency(), {}, () => {
      runs += 1;
    });
    await waitFor('the redelivery acked after ack_wait', () => acks(next.events).length === 1, 10_000);
    expect(acks(next.events)[0]).toMatchObject({ outcome: 'DUPLICATE', source: { deliveryCount: 2 } });
    expect(runs).toBe(0);
    expect(await fx.effects()).toEqual({ 'pay-slow': 1 });
  });
});
