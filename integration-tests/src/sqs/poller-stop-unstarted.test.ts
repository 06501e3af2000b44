import { IdempotentSqsPoller, type SqsIdempotencyEvents } from '@idempotent-consumer/sqs';
import { describeWithServices } from '../../support/service';
import { SqsFixture } from '../../support/sqs-fixture';
import { receiveAll, sendMessage } from '../../support/sqs-helpers';

jest.setTimeout(60_000);

type Settled = SqsIdempotencyEvents['settled'][0];

/** A promise and the function that resolves it. */
function latch(): { promise: Promise<void>; open: () => void } {
  let open!: () => void;
  const promise = new Promise<void>((resolve) => (open = resolve));
  return { promise, open };
}

describeWithServices(['redis', 'sqs'], 'sqs poller stop() starts no handler', ({ redis, sqs }) => {
  const fx = SqsFixture.forSuite(redis, sqs);

  it('messages whose batch claim Redis answers after stop() was called are not run: their claims are given back and they are visible again at once', async () => {
    // A long receive visibility: a message left invisible would not come back within this test.
    const q = await fx.queue('stop-unstarted', { VisibilityTimeout: '60' });
    const idempotency = fx.idempotency({ leaseMs: 60_000 });
    const store = idempotency.store;
    // The batch claim's reply is held (Redis answers it, later): stop() is called while it is in flight.
    const claimSent = latch();
    const answer = latch();
    const claimMany = store.claimMany.bind(store);
    jest.spyOn(store, 'claimMany').mockImplementationOnce(async (...args) => {
      claimSent.open();
      const replies = await claimMany(...args);
      await answer.promise;
      return replies;
    });
    await sendMessage(fx.sqs, q.url, 'pay-1', { key: 'k1' });
    await sendMessage(fx.sqs, q.url, 'pay-2', { key: 'k2' });
    const ran: string[] = [];
    const poller = new IdempotentSqsPoller(
      { idempotency, sqs: fx.sqs, logger: false },
      { queueUrl: q.url, waitTimeSeconds: 1, concurrency: 10, stopTimeoutMs: 20_000 },
      ({ message }) => {
        ran.push(message.Body!);
      },
    );
    const settled: Settled[] = [];
    poller.on('settled', (e) => settled.push(e));
    const received: string[] = [];
    poller.on('received', (e) => received.push(...e.messages.map((m) => m.Body!)));
    await poller.start();
    await claimSent.promise;
    const stopped = poller.stop();
    answer.open(); // within stopTimeoutMs
    await expect(stopped).resolves.toEqual({ abandoned: 0 });

    expect(received.sort()).toEqual(['pay-1', 'pay-2']);
    expect(ran).toEqual([]);
    expect(settled.map((e) => e.decision).sort()).toEqual([
      { action: 'change-visibility', reason: 'stopping', visibilityTimeoutSeconds: 0 },
      { action: 'change-visibility', reason: 'stopping', visibilityTimeoutSeconds: 0 },
    ]);
    // Visible again at once (not after the 60 s receive visibility), and their claims given back: no
    // attempt spent, so the next consumer claims them at once as attempt 1.
    expect((await receiveAll(fx.sqs, q.url, 1)).map((m) => m.Body).sort()).toEqual(['pay-1', 'pay-2']);
    const scope = q.url.slice(q.url.lastIndexOf('/') + 1);
    for (const key of ['k1', 'k2']) {
      expect(await store.get({ scope, key })).toMatchObject({ state: 'RELEASED', attempt: 0 });
    }
  });
});
