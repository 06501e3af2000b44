import { waitFor } from '../../support/net';
import { describeWithServices } from '../../support/service';
import { NatsFixture } from './fixture';

jest.setTimeout(60_000);

describeWithServices(['nats', 'redis'], 'nats adapter: ack_wait kept by working()', (urls) => {
  const fx = NatsFixture.eachTest(urls);

  it('a handler running three ack_waits, and a duplicate waiting for it on another consumer, are each delivered once; the duplicate settles when the holder ends, not after a lease', async () => {
    await fx.jsm.consumers.update(fx.stream, fx.durable, { ack_wait: 1e9 });
    // Lease 9 s, extended every 300 ms: a duplicate left to the lease would come back 5 s later at best.
    const idempotency = () => fx.idempotency({ leaseMs: 9000, heartbeatIntervalMs: 300 });
    const runs: number[] = [];
    let release!: () => void;
    const holding = new Promise<void>((resolve) => {
      release = resolve;
    });
    const handler = async ({
      key,
      message,
    }: {
      key: string | undefined;
      message: { info: { deliveryCount: number } };
    }) => {
      runs.push(message.info.deliveryCount);
      await holding;
      await fx.effect(key!);
    };
    // Two consumers of the durable: either may get the duplicate, and it waits for the holder.
    const conflicts: string[] = [];
    const runner = () => {
      const made = idempotency();
      made.on('outcome', (e) => conflicts.push(e.outcome));
      return made;
    };
    const first = await fx.consumer(runner(), { conflictWaitMs: 20_000 }, handler);
    const second = await fx.consumer(runner(), { conflictWaitMs: 20_000 }, handler);
    await fx.publish('pay-1');
    await waitFor('the holder to run', () => runs.length === 1);
    await fx.publish('pay-1');
    await waitFor(
      'the duplicate to meet the holder',
      () => conflicts.includes('CONFLICT') || runs.length > 1,
    );
    // Three ack_waits with the handler running and the duplicate waiting: working() keeps both.
    await new Promise((resolve) => setTimeout(resolve, 3000));
    const releasedAt = performance.now();
    release();
    const settled = () => [...first.events.settled, ...second.events.settled];
    await waitFor('both settled', () => settled().length === 2, 10_000);
    const duplicate = settled().find((e) => e.outcome === 'DUPLICATE')!;
    expect(performance.now() - releasedAt).toBeLessThan(3000);
    expect(duplicate.decision).toEqual({ action: 'ack', reason: 'duplicate' });
    expect(runs).toEqual([1]);
    expect(settled().map((e) => e.source.deliveryCount)).toEqual([1, 1]);
    expect(await fx.effects()).toEqual({ 'pay-1': 1 });
    expect(await fx.pending()).toEqual({ pending: 0, ackPending: 0 });
  });

  it('max_deliver is read as the broker count of runs: the last delivery of a failing message is dead-lettered, not dropped', async () => {
    await fx.jsm.consumers.update(fx.stream, fx.durable, { max_deliver: 2 });
    const { events } = await fx.consumer(fx.idempotency({ maxAttempts: 5 }), {}, () => {
      throw new Error('gateway down');
    });
    await fx.publish('pay-2');
    const [letter] = await fx.deadLetters(1);
    expect(letter!.headers!.get('x-idempotency-dead-letter-reason')).toBe('attempts-exhausted');
    expect(letter!.headers!.get('x-idempotency-error')).toBe(
      'JetStream delivers it no more (max_deliver 2): Error: gateway down',
    );
    expect(events.settled.map((e) => [e.source.deliveryCount, e.decision.action])).toEqual([
      [1, 'nak'],
      [2, 'dead-letter'],
    ]);
  });
});
