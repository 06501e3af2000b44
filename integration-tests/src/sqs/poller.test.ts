import { ChangeMessageVisibilityCommand, type Message } from '@aws-sdk/client-sqs';
import { NonRetryableError } from '@idempotent-consumer/core';
import {
  IdempotentSqsPoller,
  type SqsHandlerContext,
  type SqsIdempotencyEvents,
} from '@idempotent-consumer/sqs';
import { waitFor } from '../../support/net';
import { describeWithServices } from '../../support/service';
import { SqsFixture } from '../../support/sqs-fixture';
import { queueDepth, receiveAll, sendMessage } from '../../support/sqs-helpers';

jest.setTimeout(60_000);

type Settled = SqsIdempotencyEvents['settled'][0];
const queueNameFromUrl = (url: string) => url.slice(url.lastIndexOf('/') + 1);

describeWithServices(['redis', 'sqs'], 'sqs poller on the SQS emulator and real Redis', ({ redis, sqs }) => {
  const fx = SqsFixture.forSuite(redis, sqs);
  const pollers: IdempotentSqsPoller[] = [];
  afterEach(async () => {
    await Promise.all(pollers.splice(0).map((p) => p.stop()));
  });

  function track<T>(poller: IdempotentSqsPoller<T>): IdempotentSqsPoller<T> {
    pollers.push(poller as IdempotentSqsPoller);
    return poller;
  }

  it('runs duplicates sent with the same key once and deletes them all', async () => {
    const q = await fx.queue('dups');
    const counter = fx.counter('dups');
    const idempotency = fx.idempotency({ leaseMs: 3000 });
    const processed: Settled[] = [];
    const poller = track(
      new IdempotentSqsPoller(
        { idempotency, sqs: fx.sqs },
        { queueUrl: q.url, concurrency: 8, waitTimeSeconds: 1 },
        async ({ message, key }) => {
          await new Promise((r) => setTimeout(r, 50));
          await fx.effect(counter, key!);
          return { charged: message.Body };
        },
      ),
    );
    poller.on('settled', (p) => processed.push(p));
    // Two operations, each sent four times under its own key (different MessageIds, same body).
    for (let i = 0; i < 4; i++) {
      await sendMessage(fx.sqs, q.url, 'pay-a', { key: 'a' });
      await sendMessage(fx.sqs, q.url, 'pay-b', { key: 'b' });
    }
    poller.start();
    await waitFor(
      '8 messages deleted',
      () => processed.filter((p) => p.decision.action === 'delete').length === 8,
    );
    expect(await fx.effects(counter)).toEqual({ a: 1, b: 1 });
    expect(processed.filter((p) => p.decision.reason === 'completed')).toHaveLength(2);
    const duplicates = processed.filter((p) => p.outcome === 'DUPLICATE');
    expect(duplicates).toHaveLength(6);
    expect(duplicates.every((p) => p.decision.reason === 'duplicate')).toBe(true);
    await waitFor('queue empty', async () => (await queueDepth(fx.sqs, q.url)) === 0);
  });

  it('a visibility timeout that lapses while the handler runs gives CONFLICT and one side effect', async () => {
    const q = await fx.queue('lapse');
    const counter = fx.counter('lapse');
    const idempotency = fx.idempotency({ leaseMs: 4000 });
    let releaseHandler!: () => void;
    const handlerGate = new Promise<void>((r) => {
      releaseHandler = r;
    });
    let inHandler = false;
    const handler = async ({ key }: SqsHandlerContext) => {
      inHandler = true;
      await handlerGate;
      await fx.effect(counter, key!);
    };
    const options = { queueUrl: q.url, waitTimeSeconds: 1, concurrency: 1 };
    const a = track(new IdempotentSqsPoller({ idempotency, sqs: fx.sqs }, options, handler));
    const b = track(new IdempotentSqsPoller({ idempotency, sqs: fx.sqs }, options, handler));
    let receipt: string | undefined;
    a.on('received', ({ messages }) => {
      receipt = messages[0]!.ReceiptHandle;
    });
    const bProcessed: Settled[] = [];
    b.on('settled', (p) => bProcessed.push(p));
    await sendMessage(fx.sqs, q.url, 'once', { key: 'k' });
    a.start();
    await waitFor('poller A in the handler', () => inHandler);
    // The visibility timeout lapses while A's handler still runs (as after a long GC pause).
    await fx.sqs.send(
      new ChangeMessageVisibilityCommand({ QueueUrl: q.url, ReceiptHandle: receipt!, VisibilityTimeout: 0 }),
    );
    b.start();
    await waitFor('poller B saw a CONFLICT', () => bProcessed.some((p) => p.outcome === 'CONFLICT'));
    const conflict = bProcessed.find((p) => p.outcome === 'CONFLICT')!;
    expect(conflict.decision).toMatchObject({ action: 'change-visibility', reason: 'conflict' });
    releaseHandler();
    // A completes; its delete may carry a stale receipt handle, so the message may come back once more to
    // B as a DUPLICATE, which deletes it.
    await waitFor('queue empty', async () => (await queueDepth(fx.sqs, q.url)) === 0, 20_000, 200);
    expect(await fx.effects(counter)).toEqual({ k: 1 });
  });

  it('dead-letters a message after maxAttempts, with the reason, and records FAILED', async () => {
    const dlq = await fx.queue('dlq');
    const q = await fx.queue('exhaust');
    const idempotency = fx.idempotency({ leaseMs: 2000, maxAttempts: 3 });
    let runs = 0;
    const dead: SqsIdempotencyEvents['deadLettered'][0][] = [];
    const poller = track(
      new IdempotentSqsPoller(
        { idempotency, sqs: fx.sqs },
        {
          queueUrl: q.url,
          waitTimeSeconds: 1,
          retryBackoff: { baseMs: 0 },
          deadLetter: { queueUrl: dlq.url },
        },
        async () => {
          runs += 1;
          throw new Error('card processor down');
        },
      ),
    );
    poller.on('deadLettered', (p) => dead.push(p));
    const id = await sendMessage(fx.sqs, q.url, 'doomed', { key: 'doomed' });
    poller.start();
    await waitFor('dead-lettered', () => dead.length === 1, 20_000);
    expect(runs).toBe(3);
    expect(dead[0]).toMatchObject({
      reason: 'attempts-exhausted',
      via: 'copy',
      destination: dlq.url,
      attempt: 3,
    });
    const record = await idempotency.store.get({ scope: queueNameFromUrl(q.url), key: 'doomed' });
    expect(record).toMatchObject({ state: 'FAILED', attempt: 3 });
    expect(record!.error).toContain('card processor down');
    const [copy] = await receiveAll(fx.sqs, dlq.url);
    expect(copy!.Body).toBe('doomed');
    expect(copy!.MessageAttributes!['idempotency-key']!.StringValue).toBe('doomed');
    const attribute = (name: string) => copy!.MessageAttributes![name]?.StringValue;
    expect(attribute('x-idempotency-dead-letter-reason')).toBe('attempts-exhausted');
    expect(attribute('x-idempotency-outcome')).toBe('ACQUIRED');
    expect(attribute('x-idempotency-attempt')).toBe('3');
    expect(attribute('x-idempotency-error')).toBe('Error: card processor down');
    expect(attribute('x-idempotency-key')).toBe('doomed');
    expect(attribute('x-idempotency-scope')).toBe(queueNameFromUrl(q.url));
    expect(attribute('x-original-message-id')).toBe(id);
    await waitFor('source queue empty', async () => (await queueDepth(fx.sqs, q.url)) === 0);
  });

  it('dead-letters non-retryable errors and payload mismatches at once, without running the handler twice', async () => {
    const dlq = await fx.queue('dlq2');
    const q = await fx.queue('nonretry');
    const idempotency = fx.idempotency({ leaseMs: 2000 });
    const runs: string[] = [];
    const dead: SqsIdempotencyEvents['deadLettered'][0][] = [];
    const poller = track(
      new IdempotentSqsPoller(
        { idempotency, sqs: fx.sqs },
        { queueUrl: q.url, waitTimeSeconds: 1, concurrency: 1, deadLetter: { queueUrl: dlq.url } },
        async ({ message }) => {
          runs.push(message.Body!);
          if (message.Body === 'declined') throw new NonRetryableError('card declined');
        },
      ),
    );
    poller.on('deadLettered', (p) => dead.push(p));
    await sendMessage(fx.sqs, q.url, 'declined', { key: 'n1' });
    await sendMessage(fx.sqs, q.url, 'first', { key: 'same' });
    poller.start();
    await waitFor('two handled', () => runs.length === 2);
    await sendMessage(fx.sqs, q.url, 'second body, same key', { key: 'same' });
    await waitFor('two dead-lettered', () => dead.length === 2);
    expect(runs.sort()).toEqual(['declined', 'first']);
    expect(dead.map((d) => d.reason).sort()).toEqual(['non-retryable', 'payload-mismatch']);
    const copies = await receiveAll(fx.sqs, dlq.url);
    expect(copies.length).toBe(2);
    const fields = copies.map((c) =>
      ['x-idempotency-dead-letter-reason', 'x-idempotency-outcome'].map(
        (name) => c.MessageAttributes![name]?.StringValue,
      ),
    );
    expect(fields.sort()).toEqual([
      ['non-retryable', 'ACQUIRED'],
      ['payload-mismatch', 'PAYLOAD_MISMATCH'],
    ]);
    // The copy carries the same error text as in every broker's dead letter, and the event says it too.
    const errors = copies.map((c) => c.MessageAttributes!['x-idempotency-error']?.StringValue).sort();
    expect(errors).toEqual([
      'NonRetryableError [NON_RETRYABLE]: card declined',
      'PayloadMismatchError [PAYLOAD_MISMATCH]: the idempotency key was first used with another payload (record COMPLETED)',
    ]);
    expect(dead.map((d) => d.error).sort()).toEqual(errors);
  });

  it("leaves exhausted messages to the queue's redrive policy when asked", async () => {
    const dlq = await fx.queue('redrive-dlq');
    const q = await fx.queue('redrive', {
      RedrivePolicy: JSON.stringify({ deadLetterTargetArn: dlq.arn, maxReceiveCount: '3' }),
    });
    const idempotency = fx.idempotency({ leaseMs: 2000, maxAttempts: 2 });
    let runs = 0;
    const poller = track(
      new IdempotentSqsPoller(
        { idempotency, sqs: fx.sqs },
        { queueUrl: q.url, waitTimeSeconds: 1, retryBackoff: { baseMs: 0 }, deadLetter: 'redrive-policy' },
        async () => {
          runs += 1;
          throw new Error('boom');
        },
      ),
    );
    await sendMessage(fx.sqs, q.url, 'redrive-me', { key: 'r' });
    poller.start();
    let moved: Message[] = [];
    await waitFor(
      'SQS moved it to the DLQ',
      async () => {
        moved = await receiveAll(fx.sqs, dlq.url, 0);
        return moved.length === 1;
      },
      20_000,
      200,
    );
    expect(moved[0]!.Body).toBe('redrive-me');
    expect(runs).toBe(2);
  });

  it('keeps order within a FIFO message group, also across a retry', async () => {
    const q = await fx.queue('order', { VisibilityTimeout: '5' }, true);
    const idempotency = fx.idempotency({ leaseMs: 3000 });
    const seen: Record<string, string[]> = { g1: [], g2: [] };
    let failedOnce = false;
    const poller = track(
      new IdempotentSqsPoller(
        { idempotency, sqs: fx.sqs },
        { queueUrl: q.url, waitTimeSeconds: 1, concurrency: 4, retryBackoff: { baseMs: 0 } },
        async ({ message }) => {
          const [group, n] = message.Body!.split(':') as [string, string];
          if (group === 'g1' && n === '2' && !failedOnce) {
            failedOnce = true;
            throw new Error('transient');
          }
          await new Promise((r) => setTimeout(r, 5));
          seen[group]!.push(n);
        },
      ),
    );
    for (let i = 1; i <= 5; i++) {
      await sendMessage(fx.sqs, q.url, `g1:${i}`, { key: `g1-${i}`, groupId: 'g1' });
      await sendMessage(fx.sqs, q.url, `g2:${i}`, { key: `g2-${i}`, groupId: 'g2' });
    }
    poller.start();
    await waitFor('10 handled', () => seen.g1!.length + seen.g2!.length === 10, 20_000);
    expect(failedOnce).toBe(true);
    expect(seen).toEqual({ g1: ['1', '2', '3', '4', '5'], g2: ['1', '2', '3', '4', '5'] });
  });

  it('a CONFLICT wait that ends ACQUIRED extends the visibility before the handler: no redelivery while it runs', async () => {
    const q = await fx.queue('wait-acquired');
    const counter = fx.counter('wait-acquired');
    // Lease 30 s: the first heartbeat (and visibility extension) comes 10 s after the handler starts.
    const idempotency = fx.idempotency({ leaseMs: 30_000 });
    const request = { scope: 'wait-acquired', key: 'k' };
    const held = await idempotency.claim(request); // another worker holds the key
    const wait = jest.spyOn(idempotency, 'waitForOutcome');
    let releaseHandler!: () => void;
    const handlerGate = new Promise<void>((r) => {
      releaseHandler = r;
    });
    let inHandler = false;
    const poller = track(
      new IdempotentSqsPoller(
        { idempotency, sqs: fx.sqs },
        // The wait sets the visibility to conflictWaitMs + 1 s = 3 s.
        { queueUrl: q.url, scope: 'wait-acquired', waitTimeSeconds: 1, conflictWaitMs: 2000 },
        async ({ key }) => {
          inHandler = true;
          await handlerGate;
          await fx.effect(counter, key!);
        },
      ),
    );
    await sendMessage(fx.sqs, q.url, 'pay', { key: 'k' });
    poller.start();
    await waitFor('the poller waits for the holder', () => wait.mock.calls.length === 1);
    // The holder gives the key back (its handler threw): the wait ends with the claim, the handler runs.
    expect(held.outcome).toBe('ACQUIRED');
    await idempotency.release(request, held as Parameters<typeof idempotency.release>[1]);
    await waitFor('in the handler', () => inHandler);
    // The handler runs far longer than the wait's 3 s visibility and less than the lease: SQS must not hand
    // the message out again meanwhile. (Before the fix it did, about 3 s after the wait began.)
    try {
      const again = await receiveAll(fx.sqs, q.url, 6);
      expect(again.map((m) => m.Body)).toEqual([]);
    } finally {
      releaseHandler();
    }
    await waitFor('queue empty', async () => (await queueDepth(fx.sqs, q.url)) === 0);
    expect(await fx.effects(counter)).toEqual({ k: 1 });
  });

  it('stop() drains: it waits for the running handler and its delete', async () => {
    const q = await fx.queue('drain');
    const idempotency = fx.idempotency({ leaseMs: 3000 });
    let inHandler = false;
    let finished = false;
    const poller = new IdempotentSqsPoller(
      { idempotency, sqs: fx.sqs },
      { queueUrl: q.url, waitTimeSeconds: 1 },
      async () => {
        inHandler = true;
        await new Promise((r) => setTimeout(r, 700));
        finished = true;
      },
    );
    const deleted: unknown[] = [];
    poller.on('settled', (p) => p.decision.action === 'delete' && deleted.push(p));
    await sendMessage(fx.sqs, q.url, 'slow', { key: 'slow' });
    poller.start();
    await waitFor('in handler', () => inHandler);
    await poller.stop();
    expect(finished).toBe(true);
    expect(deleted).toHaveLength(1);
    expect(poller.running).toBe(false);
    expect(await queueDepth(fx.sqs, q.url)).toBe(0);
  });
});
