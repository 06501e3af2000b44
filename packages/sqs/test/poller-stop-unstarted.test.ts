import { Idempotency, MemoryIdempotencyStore } from '@idempotent-consumer/core';
import { IdempotentSqsPoller, type SqsIdempotencyEvents } from '@idempotent-consumer/sqs';
import { FakeSqs, message } from './fake-sqs';

const QUEUE = 'https://sqs.us-east-1.amazonaws.com/000000000000/orders';

type Settled = SqsIdempotencyEvents['settled'][0];

/** A promise and the function that resolves it. */
function latch(): { promise: Promise<void>; open: () => void } {
  let open!: () => void;
  const promise = new Promise<void>((resolve) => (open = resolve));
  return { promise, open };
}

describe('IdempotentSqsPoller stop(): no handler starts once stop() was called', () => {
  it('a FIFO message waiting behind its group is not run after stop(): made visible again at once, stop() does not wait for it', async () => {
    const store = new MemoryIdempotencyStore();
    const idempotency = new Idempotency({ store, logger: false }, { leaseMs: 3000 });
    const sqs = new FakeSqs();
    const [first, second] = [1, 2].map((i) => message(`g-${i}`, { key: `g-${i}`, group: 'g' }));
    sqs.batches.push([first!, second!]);
    const firstRunning = latch();
    const finishFirst = latch();
    const ran: string[] = [];
    const poller = new IdempotentSqsPoller(
      { idempotency, sqs: sqs.client, logger: false },
      { queueUrl: `${QUEUE}.fifo`, waitTimeSeconds: 0, stopTimeoutMs: 10_000 },
      async ({ message: m }) => {
        ran.push(m.Body!);
        if (m === first) {
          firstRunning.open();
          await finishFirst.promise;
        }
      },
    );
    const settled: Settled[] = [];
    poller.on('settled', (e) => settled.push(e));
    await poller.start();
    await firstRunning.promise;
    const stopped = poller.stop();
    finishFirst.open(); // the running handler completes during stop(): drained, deleted
    await expect(stopped).resolves.toEqual({ abandoned: 0 });

    expect(ran).toEqual(['g-1']); // the second message of the group never started
    expect(sqs.deleted).toEqual([first!.ReceiptHandle]);
    // Made visible again at once (the group unlocked in order once the first was deleted), unclaimed.
    expect(sqs.visibility).toContainEqual({ receipt: second!.ReceiptHandle, seconds: 0 });
    const decision = settled.find((e) => e.message === second)?.decision;
    expect(decision).toMatchObject({ action: 'change-visibility', visibilityTimeoutSeconds: 0 });
    expect(await store.get({ scope: 'orders.fifo', key: 'g-2' })).toBeNull();
  });

  it('a batch claim answered after stop() (before stopTimeoutMs) starts no handler: the claims are given back, the messages made visible again', async () => {
    const store = new MemoryIdempotencyStore();
    const idempotency = new Idempotency({ store, logger: false }, { leaseMs: 3000 });
    const sqs = new FakeSqs();
    const claimHeld = latch();
    const claimMany = store.claimMany.bind(store);
    const claimSent = latch();
    jest.spyOn(store, 'claimMany').mockImplementationOnce(async (...args) => {
      claimSent.open();
      await claimHeld.promise;
      return claimMany(...args);
    });
    const ran: string[] = [];
    const poller = new IdempotentSqsPoller(
      { idempotency, sqs: sqs.client, logger: false },
      { queueUrl: QUEUE, waitTimeSeconds: 0, stopTimeoutMs: 10_000 },
      ({ key }) => {
        ran.push(key!);
      },
    );
    const [a, b] = [message('a', { key: 'a' }), message('b', { key: 'b' })];
    sqs.batches.push([a, b]);
    await poller.start();
    await claimSent.promise;
    const stopped = poller.stop();
    claimHeld.open(); // answered well within stopTimeoutMs
    await expect(stopped).resolves.toEqual({ abandoned: 0 });

    expect(ran).toEqual([]);
    expect(sqs.deleted).toEqual([]);
    expect(sqs.visibility).toEqual(
      expect.arrayContaining([
        { receipt: a.ReceiptHandle, seconds: 0 },
        { receipt: b.ReceiptHandle, seconds: 0 },
      ]),
    );
    // Given back without an attempt spent: the redelivery claims them at once, as attempt 1.
    expect(await store.get({ scope: 'orders', key: 'a' })).toMatchObject({ state: 'RELEASED', attempt: 0 });
    expect(await store.get({ scope: 'orders', key: 'b' })).toMatchObject({ state: 'RELEASED', attempt: 0 });
  });
});
