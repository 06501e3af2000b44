import { ChangeMessageVisibilityBatchCommand, SendMessageCommand, type SQSClient } from '@aws-sdk/client-sqs';
import {
  type Idempotency,
  NonRetryableError,
  RedisIdempotencyStore,
  StoreUnavailableError,
  UnreadableResultError,
} from '@idempotent-consumer/core';
import {
  createSqsConsumerWiring,
  IdempotentSqsPoller,
  type SqsIdempotencyEvents,
} from '@idempotent-consumer/sqs';
import { Consumer } from 'sqs-consumer';
import { recordingLogger, withClosedRedis } from '../../support/closed-redis';
import { waitFor } from '../../support/net';
import { describeWithServices } from '../../support/service';
import { SqsFixture } from '../../support/sqs-fixture';
import { queueDepth, receiveAll, sendMessage } from '../../support/sqs-helpers';

jest.setTimeout(60_000);

/** The emulator's client, with the next `failures` dead-letter copies (SendMessage) refused. */
function refusingCopies(sqs: SQSClient, failures: { left: number }): SQSClient {
  return {
    send: (command: unknown, options?: unknown) => {
      if (command instanceof SendMessageCommand && failures.left > 0) {
        failures.left -= 1;
        return Promise.reject(new Error('SendMessage refused (injected)'));
      }
      return (sqs.send as (c: unknown, o?: unknown) => Promise<unknown>)(command, options);
    },
  } as unknown as SQSClient;
}

/**
 * The emulator's client, with the first `ChangeMessageVisibilityBatch` (a lease heartbeat's) slow: it
 * reaches the emulator only after the next visibility change was sent, or after `slowMs` (a slow round
 * trip). `sent` resolves when it was sent.
 */
function slowFirstVisibilityChange(sqs: SQSClient, slowMs: number) {
  let sent!: () => void;
  const firstSent = new Promise<void>((resolve) => (sent = resolve));
  let overtaken!: () => void;
  const next = new Promise<void>((resolve) => (overtaken = resolve));
  let changes = 0;
  const forward = (c: unknown, o?: unknown) =>
    (sqs.send as (c: unknown, o?: unknown) => Promise<unknown>)(c, o);
  const client = {
    send: async (command: unknown, options?: unknown) => {
      if (!(command instanceof ChangeMessageVisibilityBatchCommand)) return forward(command, options);
      changes += 1;
      if (changes > 1) {
        overtaken();
        return forward(command, options);
      }
      sent();
      await Promise.race([next, new Promise((r) => setTimeout(r, slowMs))]);
      return forward(command, options);
    },
  } as unknown as SQSClient;
  return { client, firstSent };
}

describeWithServices(['redis', 'sqs'], 'sqs failure paths on the SQS emulator', ({ redis, sqs }) => {
  let fx: SqsFixture;
  const stops: (() => Promise<unknown>)[] = [];
  beforeAll(() => {
    fx = new SqsFixture(redis, sqs);
  });
  afterEach(async () => {
    await Promise.all(stops.splice(0).map((s) => s()));
  });
  afterAll(() => fx.close());

  it('a Redis URL pointing at a closed port: start() fails promptly naming the host, and the console is not flooded', async () => {
    await withClosedRedis(async ({ redis: closed, port, printed }) => {
      const logger = recordingLogger();
      const q = await fx.queue('closed-redis');
      const store = new RedisIdempotencyStore({ redis: closed }, { commandTimeoutMs: 1000 });
      const { Idempotency } = await import('@idempotent-consumer/core');
      const poller = new IdempotentSqsPoller(
        { idempotency: new Idempotency({ store, logger: false }), sqs: fx.sqs, logger },
        { queueUrl: q.url },
        () => {},
      );
      const started = performance.now();
      const error = await poller.start().catch((e: unknown) => e);
      expect(error).toBeInstanceOf(StoreUnavailableError);
      expect((error as Error).message).toContain(`127.0.0.1:${port}`);
      expect(performance.now() - started).toBeLessThan(10_000);
      expect(poller.running).toBe(false);
      expect(printed.filter((line) => line.includes('[ioredis]'))).toEqual([]);
    });
  });

  it("a retry's visibility change is not overtaken by a slow heartbeat's: the message comes back after the backoff, not the lease", async () => {
    const q = await fx.queue('heartbeat-race');
    // Lease 9 s: the first heartbeat (after 3 s) sets the visibility timeout to about 9 s.
    const idempotency = fx.idempotency({ leaseMs: 9000 });
    const { client, firstSent } = slowFirstVisibilityChange(fx.sqs, 1500);
    const runs: number[] = [];
    let releasedAt = 0;
    idempotency.on('released', () => {
      releasedAt = performance.now();
    });
    const poller = new IdempotentSqsPoller(
      { idempotency, sqs: client, logger: false },
      { queueUrl: q.url, waitTimeSeconds: 1, retryBackoff: { baseMs: 1000, jitter: 'none' } },
      async () => {
        runs.push(performance.now());
        if (runs.length > 1) return 'done';
        await firstSent; // the heartbeat's visibility change is on its way
        throw new Error('transient');
      },
    );
    stops.push(() => poller.stop());
    await sendMessage(fx.sqs, q.url, 'retry-me', { key: 'k' });
    await poller.start();
    await waitFor('the second run', () => runs.length === 2, 20_000);
    // The retry's 1 s backoff landed last: back within seconds, not after the heartbeat's 9 s.
    expect(runs[1]! - releasedAt).toBeLessThan(6000);
    await waitFor('queue empty', async () => (await queueDepth(fx.sqs, q.url)) === 0);
  });

  it('an unprotected run whose dead-letter copy is refused is not run again; the next receive sends the copy', async () => {
    const dlq = await fx.queue('unprotected-dlq', {}, false, { redrive: false });
    const q = await fx.queue('unprotected');
    const failures = { left: 2 };
    let runs = 0;
    const settled: string[] = [];
    const poller = new IdempotentSqsPoller(
      { idempotency: fx.idempotency(), sqs: refusingCopies(fx.sqs, failures), logger: false },
      {
        queueUrl: q.url,
        waitTimeSeconds: 1,
        visibilityTimeoutSeconds: 1,
        idempotencyKey: () => undefined,
        missingKey: 'process',
        deadLetter: { queueUrl: dlq.url },
      },
      ({ key }) => {
        runs += 1;
        expect(key).toBeUndefined();
        throw new NonRetryableError('bad');
      },
    );
    poller.on('settled', (e: SqsIdempotencyEvents['settled'][0]) =>
      settled.push(`${e.decision.action}:${e.decision.reason}`),
    );
    stops.push(() => poller.stop());
    await poller.start();
    await sendMessage(fx.sqs, q.url, 'no-key');
    const copies = await waitFor(
      'the copy in the DLQ',
      async () => (await queueDepth(fx.sqs, dlq.url)) === 1,
      30_000,
    ).then(() => receiveAll(fx.sqs, dlq.url, 0));
    expect(copies.map((m) => m.Body)).toEqual(['no-key']);
    expect(runs).toBe(1);
    // `settled` follows the delete of the original, which may come after the copy is visible in the DLQ.
    await waitFor('the third settled', () => settled.length === 3, 10_000);
    expect(settled).toEqual([
      'leave:dead-letter-failed',
      'leave:dead-letter-failed',
      'dead-letter:non-retryable',
    ]);
    await waitFor('the original deleted', async () => (await queueDepth(fx.sqs, q.url)) === 0, 10_000);
  });

  /** `key` COMPLETED in Redis with a result in an encoding this version does not know (a newer version's). */
  async function completedUnreadable(idempotency: Idempotency, queueUrl: string, key: string): Promise<void> {
    const id = { scope: queueUrl.split('/').pop()!, key };
    const claim = await idempotency.claim(id);
    await idempotency.store.complete(id, claim.fencingToken, { retentionMs: 60_000, result: 'x{"v":2}' });
  }

  type UnreadableCase = 'poller' | 'sqs-consumer wiring' | 'sqs-consumer wiring (batch)';
  it.each(['poller', 'sqs-consumer wiring', 'sqs-consumer wiring (batch)'] as UnreadableCase[])(
    'a DUPLICATE whose stored result this version cannot decode is deleted as a duplicate, with a storeError; the handler does not run (%s)',
    async (form) => {
      const q = await fx.queue(`unreadable-${form.replace(/\W+/g, '-')}`);
      const idempotency = fx.idempotency();
      await completedUnreadable(idempotency, q.url, 'newer');
      let runs = 0;
      const handler = () => {
        runs += 1;
      };
      const settled: SqsIdempotencyEvents['settled'][0][] = [];
      const storeErrors: SqsIdempotencyEvents['storeError'][0][] = [];
      const events =
        form === 'poller'
          ? (() => {
              const poller = new IdempotentSqsPoller(
                { idempotency, sqs: fx.sqs, logger: false },
                { queueUrl: q.url, waitTimeSeconds: 1 },
                handler,
              );
              stops.push(() => poller.stop());
              return { poller };
            })()
          : (() => {
              const wiring = createSqsConsumerWiring(
                { idempotency, sqs: fx.sqs, logger: false },
                { queueUrl: q.url, batch: form === 'sqs-consumer wiring (batch)' },
                handler,
              );
              const c = Consumer.create({ ...wiring, queueUrl: q.url, sqs: fx.sqs, waitTimeSeconds: 1 });
              c.on('error', () => {});
              stops.push(async () => {
                const stopped = new Promise<void>((resolve) => c.once('stopped', () => resolve()));
                c.stop({ abort: true });
                wiring.close();
                await stopped;
              });
              return { wiring, c };
            })();
      const emitter = 'poller' in events ? events.poller : events.wiring.events;
      emitter.on('settled', (e: SqsIdempotencyEvents['settled'][0]) => settled.push(e));
      emitter.on('storeError', (e: SqsIdempotencyEvents['storeError'][0]) => storeErrors.push(e));
      if ('poller' in events) await events.poller.start();
      else events.c.start();
      await sendMessage(fx.sqs, q.url, 'charge', { key: 'newer' });
      await waitFor('the message settled', () => settled.length >= 1, 20_000);
      expect(settled[0]).toMatchObject({
        decision: { action: 'delete', reason: 'duplicate' },
        outcome: 'DUPLICATE',
        key: 'newer',
        attempt: 1,
      });
      expect(storeErrors).toEqual([
        expect.objectContaining({ operation: 'settle', error: expect.any(UnreadableResultError) }),
      ]);
      expect(runs).toBe(0);
      // Deleted for good: it does not come back after its visibility timeout.
      await waitFor('the message deleted', async () => (await queueDepth(fx.sqs, q.url)) === 0, 10_000);
    },
  );

  it('a FAILED record is dead-lettered once: a later message with its key is deleted without a second copy', async () => {
    const dlq = await fx.queue('failed-once-dlq', {}, false, { redrive: false });
    const q = await fx.queue('failed-once');
    let runs = 0;
    const settled: string[] = [];
    const idempotency = fx.idempotency();
    const poller = new IdempotentSqsPoller(
      { idempotency, sqs: fx.sqs, logger: false },
      { queueUrl: q.url, waitTimeSeconds: 1, deadLetter: { queueUrl: dlq.url } },
      () => {
        runs += 1;
        throw new NonRetryableError('declined');
      },
    );
    poller.on('settled', (e: SqsIdempotencyEvents['settled'][0]) =>
      settled.push(`${e.decision.action}:${e.decision.reason}`),
    );
    stops.push(() => poller.stop());
    await poller.start();
    await sendMessage(fx.sqs, q.url, 'charge', { key: 'once' });
    await waitFor('the first settled', () => settled.length === 1, 20_000);
    await sendMessage(fx.sqs, q.url, 'charge', { key: 'once' }); // a duplicate send
    await waitFor('the second settled', () => settled.length === 2, 20_000);
    expect(settled).toEqual(['dead-letter:non-retryable', 'delete:dead-lettered-before']);
    expect(runs).toBe(1);
    expect((await receiveAll(fx.sqs, dlq.url, 0)).map((m) => m.Body)).toEqual(['charge']);
    expect(
      await (idempotency.store as RedisIdempotencyStore).get({ scope: q.url.split('/').pop()!, key: 'once' }),
    ).toMatchObject({
      deadLettered: true,
    });
  });
});
