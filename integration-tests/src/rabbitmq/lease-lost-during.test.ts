import { buildRecordKey } from '@idempotent-consumer/core';
import { waitFor } from '../../support/net';
import { describeWithServices } from '../../support/service';
import { acks, RabbitFixture } from './fixture';

describeWithServices(['rabbitmq', 'redis'], 'rabbitmq adapter: where a lease was lost', (urls) => {
  jest.setTimeout(30_000);
  const fx = RabbitFixture.eachTest(urls);

  it.each([
    [
      'write',
      'a handler that threw, whose release is refused (the record vanished; no heartbeat was due): retried, and the retry completes',
    ],
    [
      'heartbeat',
      'a refused heartbeat aborted the handler, which then returned; its write is refused too: acked, not run again',
    ],
  ] as const)("leaseLost during '%s': %s", async (where, _what) => {
    // 'write': a lease far longer than the test, so no heartbeat is due while the handler runs and only the
    // release after it meets the loss. 'heartbeat': the first heartbeat comes about 100 ms in.
    const idempotency = fx.idempotency({ leaseMs: where === 'write' ? 60_000 : 300 });
    let runs = 0;
    const { events } = await fx.consumer(
      idempotency,
      { conflictWaitMs: 0 },
      async ({ key, scope, signal }) => {
        runs += 1;
        if (runs > 1) return 'done';
        // Redis loses the record while the first run goes on (a restart without persistence, a failover).
        await fx.redis.del(buildRecordKey(fx.prefix, { scope, key: key! }));
        if (where === 'write') throw new Error('the charge failed, retry it');
        // The next heartbeat is refused: the runner aborts the handler's signal; the handler returns.
        await new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }));
        return 'done anyway';
      },
    );
    fx.publish({ n: 1 }, { messageId: 'lost' });
    await waitFor('the lease-lost event', () => events.leaseLost.length === 1);
    expect(events.leaseLost[0]).toMatchObject({
      key: 'lost',
      handlerCompleted: where === 'heartbeat',
      during: where,
    });
    await waitFor('the ack', () => acks(events).length === 1);
    expect(runs).toBe(where === 'write' ? 2 : 1);
    expect(events.leaseLost).toHaveLength(1);
  });
});
