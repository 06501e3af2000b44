import { SendMessageCommand, type SQSClient } from '@aws-sdk/client-sqs';
import { NonRetryableError, RedisIdempotencyStore, StoreUnavailableError } from '@idempotent-consumer/core';
import { IdempotentSqsPoller, type SqsEvents } from '@idempotent-consumer/sqs';
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
    poller.on('settled', (e: SqsEvents['settled'][0]) =>
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
    poller.on('settled', (e: SqsEvents['settled'][0]) =>
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
