import type { RedisIdempotencyStore } from '@idempotent-consumer/core';
import { IdempotentSqsPoller, type SqsIdempotencyEvents } from '@idempotent-consumer/sqs';
import { waitFor } from '../../support/net';
import { describeWithServices } from '../../support/service';
import { SqsFixture } from '../../support/sqs-fixture';
import { sendMessage } from '../../support/sqs-helpers';

describeWithServices(['redis', 'sqs'], 'sqs: where a lease was lost', ({ redis, sqs }) => {
  jest.setTimeout(30_000);
  const fx = SqsFixture.forSuite(redis, sqs);
  const stops: (() => Promise<unknown>)[] = [];
  afterEach(async () => {
    await Promise.all(stops.splice(0).map((s) => s()));
  });

  it.each([
    ['write', 'a handler that threw, whose release is refused (the record vanished; no heartbeat was due)'],
    ['heartbeat', 'a refused heartbeat aborted the handler, which then returned; its write is refused too'],
  ] as const)("leaseLost during '%s': %s", async (where, _what) => {
    const q = await fx.queue(`lost-${where}`);
    // 'write': a lease far longer than the test, so no heartbeat is due while the handler runs and only the
    // release after it meets the loss. 'heartbeat': the first heartbeat comes about 100 ms in.
    const idempotency = fx.idempotency({ leaseMs: where === 'write' ? 60_000 : 300 });
    const store = idempotency.store as RedisIdempotencyStore;
    let runs = 0;
    const lost: SqsIdempotencyEvents['leaseLost'][0][] = [];
    const settled: SqsIdempotencyEvents['settled'][0][] = [];
    const poller = new IdempotentSqsPoller(
      { idempotency, sqs: fx.sqs, logger: false },
      { queueUrl: q.url, waitTimeSeconds: 1 },
      async ({ key, scope, signal }) => {
        runs += 1;
        // Redis loses the record while the handler runs (a restart without persistence, a failover).
        await fx.redis.del(store.recordKey({ scope, key: key! }));
        if (where === 'write') throw new Error('the charge failed, retry it');
        // The next heartbeat is refused: the runner aborts the handler's signal; the handler returns.
        await new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }));
        return 'charged anyway';
      },
    );
    stops.push(() => poller.stop());
    poller.on('leaseLost', (e) => lost.push(e));
    poller.on('settled', (e) => settled.push(e));
    await poller.start();
    await sendMessage(fx.sqs, q.url, 'charge', { key: 'lost' });
    await waitFor('the message settled', () => settled.length >= 1, 20_000);
    expect(lost).toEqual([
      expect.objectContaining({ key: 'lost', during: where, handlerCompleted: where === 'heartbeat' }),
    ]);
    expect(settled[0]).toMatchObject({ decision: { action: 'leave', reason: 'lease-lost' } });
    expect(runs).toBe(1);
  });
});
