import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { IdempotentSqsPoller, type SqsIdempotencyEvents } from '@idempotent-consumer/sqs';
import { waitFor } from '../../support/net';
import { describeWithServices } from '../../support/service';
import { SqsFixture } from '../../support/sqs-fixture';
import { queueDepth, sendMessage } from '../../support/sqs-helpers';

const WORKER = join(__dirname, '../../workers/sqs-kill-worker.ts');

jest.setTimeout(60_000);

describeWithServices(['redis', 'sqs'], 'sqs poller killed mid-handler', ({ redis, sqs }) => {
  const fx = SqsFixture.forSuite(redis, sqs);

  it('after SIGKILL, the message comes back, a second poller runs it as ACQUIRED_STALE, once', async () => {
    const q = await fx.queue('kill');
    const counter = fx.counter('kill');
    const leaseMs = 1500;
    const keyPrefix = `${fx.prefix}-kill`;
    await sendMessage(fx.sqs, q.url, 'charge-1', { key: 'pay-1' });

    const child = spawn(process.execPath, ['--import', 'tsx', WORKER], {
      env: {
        ...process.env,
        REDIS_URL: redis,
        SQS_ENDPOINT: sqs,
        QUEUE_URL: q.url,
        KEY_PREFIX: keyPrefix,
        LEASE_MS: String(leaseMs),
      },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    const exited = new Promise((r) => child.once('exit', r));
    let out = '';
    child.stdout!.on('data', (d) => {
      out += String(d);
    });
    try {
      await waitFor('the child poller in its handler', () => out.includes('IN_HANDLER'), 30_000);
    } finally {
      child.kill('SIGKILL');
      await exited;
    }
    const killedToken = Number(/IN_HANDLER (\d+)/.exec(out)![1]);

    const { Idempotency, RedisIdempotencyStore } = await import('@idempotent-consumer/core');
    const idempotency = new Idempotency(
      { store: new RedisIdempotencyStore({ redis: fx.redis }, { keyPrefix }) },
      { leaseMs },
    );
    const seen: { outcome: string; attempt: number; fencingToken: number }[] = [];
    const processed: SqsIdempotencyEvents['settled'][0][] = [];
    const second = new IdempotentSqsPoller(
      { idempotency, sqs: fx.sqs },
      { queueUrl: q.url, waitTimeSeconds: 1 },
      async ({ key, outcome, attempt, fencingToken }) => {
        seen.push({ outcome, attempt, fencingToken });
        await fx.effect(counter, key!);
      },
    );
    second.on('settled', (p) => processed.push(p));
    const started = Date.now();
    second.start();
    try {
      await waitFor(
        'the second poller deleted it',
        () => processed.some((p) => p.decision.action === 'delete'),
        20_000,
      );
    } finally {
      await second.stop();
    }
    // It came back only after the killed poller's visibility timeout (about the lease) lapsed.
    expect(Date.now() - started).toBeLessThan(15_000);
    expect(seen).toEqual([{ outcome: 'ACQUIRED_STALE', attempt: 2, fencingToken: expect.any(Number) }]);
    expect(seen[0]!.fencingToken).toBeGreaterThan(killedToken);
    expect(await fx.effects(counter)).toEqual({ 'pay-1': 1 });
    expect(await queueDepth(fx.sqs, q.url)).toBe(0);
  });
});
