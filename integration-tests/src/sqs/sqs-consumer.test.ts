import {
  ChangeMessageVisibilityBatchCommand,
  ChangeMessageVisibilityCommand,
  ReceiveMessageCommand,
  SendMessageCommand,
  type SQSClient,
} from '@aws-sdk/client-sqs';
import { Idempotency, NonRetryableError, RedisIdempotencyStore } from '@idempotent-consumer/core';
import {
  createSqsConsumerWiring,
  type SqsConsumerWiring,
  type SqsHandlerContext,
  type SqsIdempotencyEvents,
} from '@idempotent-consumer/sqs';
import { Consumer } from 'sqs-consumer';
import { withClosedRedis } from '../../support/closed-redis';
import { blackHole, settlesWithin, waitFor } from '../../support/net';
import { describeWithServices } from '../../support/service';
import { SqsFixture } from '../../support/sqs-fixture';
import { blackHoling, queueDepth, receiveAll, sendMessage, sqsClient } from '../../support/sqs-helpers';

// sqs-consumer 15 declares `engines.node >= 22` but runs on Node 20 (its CommonJS build is used here), so
// these tests drive the wrappers through a real Consumer.
jest.setTimeout(60_000);

type Settled = SqsIdempotencyEvents['settled'][0];

/** Collects every `settled` event of a wiring. */
function settledOf(wiring: SqsConsumerWiring): Settled[] {
  const all: Settled[] = [];
  wiring.events.on('settled', (e) => all.push(e as Settled));
  return all;
}

/**
 * The documented shutdown, the Consumer's `stop()` then the wiring's `close()`: resolves with whether the
 * Consumer emitted `stopped` within 10 s. Give the Consumer a longer `pollingCompleteWaitTimeMs`, so its
 * `stopped` waits for its last poll (handlers included) to end.
 */
async function stopAndClose(c: Consumer, wiring: SqsConsumerWiring): Promise<'stopped' | 'still polling'> {
  const stopped = new Promise<void>((resolve) => c.once('stopped', () => resolve()));
  c.stop();
  wiring.close();
  const { status } = await settlesWithin('the Consumer stopped', stopped, 10_000).catch(() => ({
    status: 'timeout',
  }));
  return status === 'fulfilled' ? 'stopped' : 'still polling';
}

describeWithServices(['redis', 'sqs'], 'sqs-consumer wrappers with a real Consumer', ({ redis, sqs }) => {
  const fx = SqsFixture.forSuite(redis, sqs);
  const consumers: Consumer[] = [];
  // The wrappers never reject, so sqs-consumer must never report a processing error.
  const processingErrors: unknown[] = [];
  afterEach(async () => {
    await Promise.all(
      consumers.splice(0).map(
        (c) =>
          new Promise<void>((resolve) => {
            if (!c.status.isRunning) return resolve();
            c.once('stopped', () => resolve());
            c.stop({ abort: true });
          }),
      ),
    );
  });
  afterEach(() => {
    expect(processingErrors.splice(0)).toEqual([]);
  });

  function consumer(options: Parameters<typeof Consumer.create>[0]): Consumer {
    const c = Consumer.create({ sqs: fx.sqs, waitTimeSeconds: 1, ...options });
    // Receive errors (the aborted long poll at stop) are expected; the wrappers themselves never throw.
    c.on('error', () => {});
    c.on('processing_error', (error) => processingErrors.push(error));
    consumers.push(c);
    return c;
  }

  it("wiring.close() aborts the pre-receive dead-letter check an SQS endpoint never answers: the stopped Consumer's poll ends and no socket is left open", async () => {
    const hole = await blackHole();
    try {
      const sqs = sqsClient(hole.url);
      const queueUrl = `${hole.url}/000000000000/orders`;
      const wiring = createSqsConsumerWiring(
        { idempotency: fx.idempotency(), sqs, logger: false },
        { queueUrl },
        () => 1,
      );
      // It waits for its poll to end before `stopped`, up to pollingCompleteWaitTimeMs.
      const c = consumer({ ...wiring, queueUrl, sqs, pollingCompleteWaitTimeMs: 60_000 });
      c.start();
      await hole.requested; // the poll's preReceiveMessageCallback: GetQueueAttributes, never answered
      // The aborted check is reported as one receive `error` (the consumer helper ignores them).
      // The check held the poll (and its socket) for ever: `stopped` came only at pollingCompleteWaitTimeMs.
      expect(await stopAndClose(c, wiring)).toBe('stopped');
      await waitFor('the check closed its connection', () => hole.open === 0, 5_000);
    } finally {
      await hole.close();
    }
  });

  it.each([
    ['a retry backoff (ChangeMessageVisibility)', false, ChangeMessageVisibilityCommand, new Error('flaky')],
    [
      'a retry backoff (ChangeMessageVisibilityBatch)',
      true,
      ChangeMessageVisibilityBatchCommand,
      new Error('flaky'),
    ],
    ['a dead-letter copy (SendMessage)', false, SendMessageCommand, new NonRetryableError('declined')],
  ])(
    'wiring.close() aborts %s an SQS endpoint never answers: the Consumer stops at once, no socket is left open, and the message comes back',
    async (_what, batch, blackHoled, thrown) => {
      const hole = await blackHole();
      const unhandled: unknown[] = [];
      const onUnhandled = (reason: unknown) => unhandled.push(reason);
      process.on('unhandledRejection', onUnhandled);
      try {
        const dlq = await fx.queue('c-hole-dlq', {}, false, { redrive: false });
        const q = await fx.queue('c-hole');
        const sqs = blackHoling(fx.sqs, sqsClient(hole.url), blackHoled);
        const wiring = createSqsConsumerWiring(
          { idempotency: fx.idempotency(), sqs, logger: false },
          { queueUrl: q.url, batch, deadLetter: { queueUrl: dlq.url } },
          () => {
            throw thrown;
          },
        );
        await sendMessage(fx.sqs, q.url, 'pay', { key: 'k' });
        // Received invisible for 2 s; its `stopped` waits for its poll (handlers included) up to 60 s.
        const c = consumer({
          ...wiring,
          queueUrl: q.url,
          sqs,
          visibilityTimeout: 2,
          pollingCompleteWaitTimeMs: 60_000,
        });
        c.start();
        await hole.requested; // the wiring's request for the handler's error, never answered
        // The request held the handler (so the poll) until the SDK's socket timeout (15 min, then a retry).
        expect(await stopAndClose(c, wiring)).toBe('stopped');
        await waitFor('the request closed its connection', () => hole.open === 0, 5_000);
        // Nothing deleted nor copied: the message comes back once the receive's visibility timeout lapses.
        expect((await receiveAll(fx.sqs, q.url, 10)).map((m) => m.Body)).toEqual(['pay']);
        expect(await queueDepth(fx.sqs, dlq.url)).toBe(0);
        expect(unhandled).toEqual([]);
      } finally {
        process.off('unhandledRejection', onUnhandled);
        await hole.close();
      }
    },
  );

  it("wiring.close() while the store does not answer: the stopped Consumer's last poll, paused for the store, receives nothing", async () => {
    await withClosedRedis(async ({ redis: closed }) => {
      const q = await fx.queue('c-closed-gate');
      const store = new RedisIdempotencyStore({ redis: closed }, { commandTimeoutMs: 300 });
      let receivesAfterStop = 0;
      let stopping = false;
      const sqs = {
        send: (command: unknown, options?: unknown) => {
          if (command instanceof ReceiveMessageCommand && stopping) receivesAfterStop += 1;
          return (fx.sqs.send as (c: unknown, o?: unknown) => Promise<unknown>)(command, options);
        },
      } as unknown as SQSClient;
      const wiring = createSqsConsumerWiring(
        { idempotency: new Idempotency({ store, logger: false }), sqs, logger: false },
        { queueUrl: q.url },
        () => 1,
      );
      const down = new Promise<void>((resolve) => wiring.events.once('storeUnavailable', () => resolve()));
      let polls = 0;
      const c = consumer({
        ...wiring,
        preReceiveMessageCallback: () => {
          polls += 1;
          return wiring.preReceiveMessageCallback();
        },
        queueUrl: q.url,
        sqs,
        pollingCompleteWaitTimeMs: 60_000,
      });
      await sendMessage(fx.sqs, q.url, 'first', { key: 'a' });
      c.start();
      await down; // the first message met the store down: the wiring fails closed
      // The next poll waits in preReceiveMessageCallback for a ping to answer.
      await waitFor('the next poll', () => polls === 2);
      await sendMessage(fx.sqs, q.url, 'second', { key: 'b' });
      stopping = true;
      expect(await stopAndClose(c, wiring)).toBe('stopped');
      // Still fail closed: the stopped Consumer did not receive (so hide, and count a receive of) `second`.
      expect(receivesAfterStop).toBe(0);
      const visible = await receiveAll(fx.sqs, q.url, 0);
      expect(visible.map((m) => [m.Body, m.Attributes?.ApproximateReceiveCount])).toEqual([['second', '1']]);
    });
  });

  it("wiring.close() ends a CONFLICT wait for the key's holder: the Consumer stops at once, nothing deleted", async () => {
    const q = await fx.queue('c-close-wait');
    const idempotency = fx.idempotency();
    await idempotency.claim({ scope: 'c-close-wait', key: 'k' }); // another worker holds the key
    const wait = jest.spyOn(idempotency, 'waitForOutcome');
    let runs = 0;
    const wiring = createSqsConsumerWiring(
      { idempotency, sqs: fx.sqs, logger: false },
      { queueUrl: q.url, scope: 'c-close-wait', conflictWaitMs: 30_000 },
      () => {
        runs += 1;
      },
    );
    await sendMessage(fx.sqs, q.url, 'pay', { key: 'k' });
    const c = consumer({ ...wiring, queueUrl: q.url, pollingCompleteWaitTimeMs: 60_000 });
    c.start();
    await waitFor('the wiring waits for the holder', () => wait.mock.calls.length === 1);
    // The wait held the handler (so the poll) for its whole conflictWaitMs.
    expect(await stopAndClose(c, wiring)).toBe('stopped');
    expect(runs).toBe(0);
    expect(await queueDepth(fx.sqs, q.url)).toBe(1);
  });

  it("wiring.close() aborts the signal of an unprotected handler (missingKey: 'process'): the Consumer stops at once", async () => {
    const q = await fx.queue('c-close-unprotected');
    let running!: () => void;
    const started = new Promise<void>((resolve) => {
      running = resolve;
    });
    const wiring = createSqsConsumerWiring(
      { idempotency: fx.idempotency(), sqs: fx.sqs, logger: false },
      { queueUrl: q.url, idempotencyKey: () => undefined, missingKey: 'process' },
      // A handler that passes its signal on to its I/O, as the docs ask: it ends when the signal aborts.
      ({ signal }) =>
        new Promise<never>((_, reject) => {
          signal.addEventListener('abort', () => reject(signal.reason));
          running();
        }),
    );
    await sendMessage(fx.sqs, q.url, 'no-key');
    const c = consumer({ ...wiring, queueUrl: q.url, pollingCompleteWaitTimeMs: 60_000 });
    c.start();
    await started;
    // Nothing aborted the signal (handlerTimeoutMs is 0 by default): the handler, so the poll, ran for ever.
    expect(await stopAndClose(c, wiring)).toBe('stopped');
    expect(await queueDepth(fx.sqs, q.url)).toBe(1);
  });

  it('handleMessage: duplicates with the same key run once; every copy is deleted', async () => {
    const q = await fx.queue('c-dups');
    const counter = fx.counter('c-dups');
    const idempotency = fx.idempotency({ leaseMs: 3000 });
    const wiring = createSqsConsumerWiring(
      { idempotency, sqs: fx.sqs },
      { queueUrl: q.url },
      async ({ key }) => {
        await fx.effect(counter, key!);
      },
    );
    const processed = settledOf(wiring);
    // The spread carries exactly the Consumer options the wiring sets; events and the check stay behind.
    expect(Object.keys(wiring).sort()).toEqual([
      'handleMessage',
      'messageAttributeNames',
      'messageSystemAttributeNames',
      'preReceiveMessageCallback',
    ]);
    for (let i = 0; i < 3; i++) await sendMessage(fx.sqs, q.url, 'same', { key: 'k1' });
    consumer({ ...wiring, queueUrl: q.url, batchSize: 10 }).start();
    await waitFor('queue empty', async () => (await queueDepth(fx.sqs, q.url)) === 0, 20_000, 200);
    expect(await fx.effects(counter)).toEqual({ k1: 1 });
    expect(processed.filter((p) => p.decision.reason === 'completed')).toHaveLength(1);
    expect(processed.filter((p) => p.outcome === 'DUPLICATE')).toHaveLength(2);
  });

  it('handleMessage: a visibility timeout that lapses mid-handler gives CONFLICT to the second consumer, one side effect', async () => {
    // The Consumer receives with a 1 s visibility timeout and no heartbeat of its own; the lease is 6 s, so
    // the wrapper's first heartbeat (every 2 s) comes after SQS has already shown the message again.
    const q = await fx.queue('c-lapse');
    const counter = fx.counter('c-lapse');
    const idempotency = fx.idempotency({ leaseMs: 6000 });
    const processed: Settled[] = [];
    const handler = async ({ key }: SqsHandlerContext) => {
      await new Promise((r) => setTimeout(r, 2500));
      await fx.effect(counter, key!);
    };
    const make = () => {
      const wiring = createSqsConsumerWiring(
        { idempotency, sqs: fx.sqs },
        // No wait for the holder's outcome: the CONFLICT path itself is under test (conflict-wait.test.ts
        // covers the wait).
        { queueUrl: q.url, conflictWaitMs: 0 },
        handler,
      );
      wiring.events.on('settled', (p) => processed.push(p));
      return wiring;
    };
    await sendMessage(fx.sqs, q.url, 'slow', { key: 'slow' });
    consumer({ ...make(), queueUrl: q.url, visibilityTimeout: 1 }).start();
    consumer({ ...make(), queueUrl: q.url, visibilityTimeout: 1 }).start();
    await waitFor('a CONFLICT', () => processed.some((p) => p.outcome === 'CONFLICT'), 10_000);
    await waitFor('queue empty', async () => (await queueDepth(fx.sqs, q.url)) === 0, 20_000, 200);
    expect(await fx.effects(counter)).toEqual({ slow: 1 });
    const conflict = processed.find((p) => p.outcome === 'CONFLICT')!;
    expect(conflict.decision).toMatchObject({ action: 'change-visibility', reason: 'conflict' });
  });

  it('handleMessage: a CONFLICT wait that ends ACQUIRED extends the visibility before the handler: no redelivery while it runs', async () => {
    const q = await fx.queue('c-wait-acquired');
    const counter = fx.counter('c-wait-acquired');
    // Lease 30 s: the first heartbeat (and visibility extension) comes 10 s after the handler starts.
    const idempotency = fx.idempotency({ leaseMs: 30_000 });
    const request = { scope: 'c-wait-acquired', key: 'k' };
    const held = await idempotency.claim(request); // another worker holds the key
    const wait = jest.spyOn(idempotency, 'waitForOutcome');
    let releaseHandler!: () => void;
    const handlerGate = new Promise<void>((r) => {
      releaseHandler = r;
    });
    let inHandler = false;
    const wiring = createSqsConsumerWiring(
      { idempotency, sqs: fx.sqs },
      // The wait sets the visibility to conflictWaitMs + 1 s = 3 s.
      { queueUrl: q.url, scope: 'c-wait-acquired', conflictWaitMs: 2000 },
      async ({ key }) => {
        inHandler = true;
        await handlerGate;
        await fx.effect(counter, key!);
      },
    );
    await sendMessage(fx.sqs, q.url, 'pay', { key: 'k' });
    // The Consumer's own visibility timeout (30 s) would cover the handler, and it sends no heartbeat.
    consumer({ ...wiring, queueUrl: q.url, visibilityTimeout: 30 }).start();
    await waitFor('the wiring waits for the holder', () => wait.mock.calls.length === 1);
    // The holder gives the key back (its handler threw): the wait ends with the claim, the handler runs.
    expect(held.outcome).toBe('ACQUIRED');
    await idempotency.release(request, held as Parameters<typeof idempotency.release>[1]);
    await waitFor('in the handler', () => inHandler);
    try {
      // The handler runs far longer than the wait's 3 s visibility: SQS must not hand the message out again.
      const again = await receiveAll(fx.sqs, q.url, 6);
      expect(again.map((m) => m.Body)).toEqual([]);
    } finally {
      releaseHandler();
    }
    await waitFor('queue empty', async () => (await queueDepth(fx.sqs, q.url)) === 0, 20_000, 200);
    expect(await fx.effects(counter)).toEqual({ k: 1 });
    wiring.close();
  });

  it('handleMessage: handler errors are retried with a visibility backoff, then dead-lettered', async () => {
    const dlq = await fx.queue('c-dlq');
    const q = await fx.queue('c-retry');
    const idempotency = fx.idempotency({ leaseMs: 2000, maxAttempts: 2 });
    let runs = 0;
    const wiring = createSqsConsumerWiring(
      { idempotency, sqs: fx.sqs },
      { queueUrl: q.url, retryBackoff: { baseMs: 1000, jitter: 'none' }, deadLetter: { queueUrl: dlq.url } },
      async () => {
        runs += 1;
        throw new Error('flaky');
      },
    );
    const processed = settledOf(wiring);
    const retries: SqsIdempotencyEvents['retryScheduled'][0][] = [];
    wiring.events.on('retryScheduled', (e) => retries.push(e));
    await sendMessage(fx.sqs, q.url, 'flaky', { key: 'f' });
    const started = Date.now();
    consumer({ ...wiring, queueUrl: q.url }).start();
    await waitFor('dead-lettered', () => processed.some((p) => p.decision.action === 'dead-letter'), 15_000);
    expect(runs).toBe(2);
    expect(processed[0]!.decision).toEqual({
      action: 'change-visibility',
      reason: 'handler-error',
      visibilityTimeoutSeconds: 1,
    });
    expect(retries).toEqual([
      expect.objectContaining({ reason: 'handler-error', delayMs: 1000, attempt: 1 }),
    ]);
    // The retry waited for the backoff's visibility timeout (1 s from ApproximateReceiveCount 1).
    expect(Date.now() - started).toBeGreaterThanOrEqual(900);
    expect((await receiveAll(fx.sqs, dlq.url))[0]!.Body).toBe('flaky');
    await waitFor('source empty', async () => (await queueDepth(fx.sqs, q.url)) === 0);
  });

  it('handleMessageBatch: claims a batch at once, returns only what may be deleted', async () => {
    const q = await fx.queue('c-batch');
    const counter = fx.counter('c-batch');
    const idempotency = fx.idempotency({ leaseMs: 3000 });
    let claimManyCalls = 0;
    const claimMany = idempotency.claimMany.bind(idempotency);
    idempotency.claimMany = (...args) => {
      claimManyCalls += 1;
      return claimMany(...args);
    };
    const wiring = createSqsConsumerWiring(
      { idempotency, sqs: fx.sqs },
      { queueUrl: q.url, retryBackoff: { baseMs: 0 }, batch: true },
      async ({ message, key }) => {
        if (message.Body === 'fails-once' && (await fx.effect(counter, 'fails-once-attempts')) === 1) {
          throw new Error('once');
        }
        await fx.effect(counter, key!);
      },
    );
    const processed = settledOf(wiring);
    expect(Object.keys(wiring)).toContain('handleMessageBatch');
    expect(Object.keys(wiring)).not.toContain('handleMessage');
    for (const [body, key] of [
      ['a', 'a'],
      ['b', 'b'],
      ['a', 'a'],
      ['fails-once', 'x'],
    ]) {
      await sendMessage(fx.sqs, q.url, body!, { key });
    }
    consumer({ ...wiring, queueUrl: q.url, batchSize: 10 }).start();
    await waitFor('queue empty', async () => (await queueDepth(fx.sqs, q.url)) === 0, 20_000, 200);
    expect(await fx.effects(counter)).toEqual({ a: 1, b: 1, x: 1, 'fails-once-attempts': 2 });
    expect(claimManyCalls).toBeGreaterThanOrEqual(1);
    expect(processed.some((p) => p.decision.reason === 'handler-error')).toBe(true);
  });
});
