import { join } from 'node:path';
import {
  ChangeMessageVisibilityBatchCommand,
  DeleteMessageBatchCommand,
  SendMessageCommand,
} from '@aws-sdk/client-sqs';
import { NonRetryableError } from '@idempotent-consumer/core';
import { IdempotentSqsPoller, type SqsIdempotencyEvents } from '@idempotent-consumer/sqs';
import { type BlackHole, blackHole, settlesWithin, waitFor } from '../../support/net';
import { describeWithServices } from '../../support/service';
import { SqsFixture } from '../../support/sqs-fixture';
import { blackHoling, queueDepth, receiveAll, sendMessage, sqsClient } from '../../support/sqs-helpers';
import { startWorker } from '../../support/worker-process';

const WORKER = join(__dirname, '../../workers/sqs-stop-worker.ts');

jest.setTimeout(60_000);

type Settled = SqsIdempotencyEvents['settled'][0];

describeWithServices(
  ['redis', 'sqs'],
  'sqs poller stop() against an SQS endpoint that never answers',
  ({ redis, sqs }) => {
    const fx = SqsFixture.forSuite(redis, sqs);
    const holes: BlackHole[] = [];
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown) => unhandled.push(reason);
    beforeEach(() => process.on('unhandledRejection', onUnhandled));
    afterEach(async () => {
      process.off('unhandledRejection', onUnhandled);
      await Promise.all(holes.splice(0).map((h) => h.close()));
      expect(unhandled.splice(0)).toEqual([]);
    });

    /**
     * A poller whose `blackHoled` requests go to an endpoint that never answers (the rest to the emulator),
     * with one message `pay` (key `k`, received invisible for 3 s, the lease) on a queue whose dead-letter
     * copies go to `dlq`: stops it once that request was sent (`stopTimeoutMs` 500 ms) and resolves with
     * what `stop()` resolved with and the endpoint, its request still unanswered.
     */
    async function stopWhileBlackHoled(
      name: string,
      blackHoled: abstract new (...args: never[]) => unknown,
      handler: () => unknown,
    ) {
      const hole = await blackHole();
      holes.push(hole);
      const dlq = await fx.queue(`${name}-dlq`, {}, false, { redrive: false });
      const q = await fx.queue(name);
      const idempotency = fx.idempotency({ leaseMs: 3000 });
      const poller = new IdempotentSqsPoller(
        { idempotency, sqs: blackHoling(fx.sqs, sqsClient(hole.url), blackHoled), logger: false },
        { queueUrl: q.url, waitTimeSeconds: 1, stopTimeoutMs: 500, deadLetter: { queueUrl: dlq.url } },
        handler,
      );
      await sendMessage(fx.sqs, q.url, 'pay', { key: 'k' });
      await poller.start();
      await hole.requested; // the request for the handler's outcome, never answered
      const stopped = await settlesWithin('stop() resolved', poller.stop(), 10_000);
      return { hole, q, dlq, idempotency, stopped };
    }

    it.each([
      ['the last delete (DeleteMessageBatch)', DeleteMessageBatchCommand, undefined],
      [
        'a retry backoff (ChangeMessageVisibilityBatch)',
        ChangeMessageVisibilityBatchCommand,
        new Error('flaky'),
      ],
      ['a dead-letter copy (SendMessage)', SendMessageCommand, new NonRetryableError('declined')],
    ])(
      'once stop() resolved, %s an SQS endpoint never answers is aborted: no socket is left open to keep the process alive, and the message comes back',
      async (_what, blackHoled, thrown) => {
        const { hole, q, dlq, stopped } = await stopWhileBlackHoled('p-stop-hole', blackHoled, () => {
          if (thrown) throw thrown;
        });
        expect(stopped).toEqual({ status: 'fulfilled', value: { abandoned: 1 } });
        // The request held its socket (and the process) until the SDK's socket timeout: 15 minutes.
        await waitFor('the request closed its connection', () => hole.open === 0, 5_000);
        // Nothing deleted nor copied: it comes back once the receive's visibility timeout (3 s) lapses.
        expect((await receiveAll(fx.sqs, q.url, 10)).map((m) => m.Body)).toEqual(['pay']);
        expect(await queueDepth(fx.sqs, dlq.url)).toBe(0);
      },
    );

    it('a completed message whose delete stop() aborted comes back as a DUPLICATE and is deleted then, without running again', async () => {
      let runs = 0;
      const { q, idempotency } = await stopWhileBlackHoled('p-stop-dup', DeleteMessageBatchCommand, () => {
        runs += 1;
      });
      const settled: Settled[] = [];
      const again = new IdempotentSqsPoller(
        { idempotency, sqs: fx.sqs, logger: false },
        { queueUrl: q.url, waitTimeSeconds: 1 },
        () => {
          runs += 1;
        },
      );
      again.on('settled', (e) => settled.push(e));
      await again.start();
      try {
        await waitFor('the redelivery settled', () => settled.length > 0, 20_000);
      } finally {
        await again.stop();
      }
      expect(settled.map((e) => [e.outcome, e.decision.action])).toEqual([['DUPLICATE', 'delete']]);
      expect(runs).toBe(1);
      expect(await queueDepth(fx.sqs, q.url)).toBe(0);
    });

    it('a service that awaits stop() and lets its event loop drain exits soon after, its last delete never answered', async () => {
      const hole = await blackHole();
      holes.push(hole);
      const q = await fx.queue('p-stop-exit');
      await sendMessage(fx.sqs, q.url, 'pay', { key: 'k' });
      const worker = startWorker(WORKER, {
        REDIS_URL: redis,
        SQS_ENDPOINT: sqs,
        HOLE_ENDPOINT: hole.url,
        QUEUE_URL: q.url,
        KEY_PREFIX: `${fx.prefix}-exit`,
      });
      try {
        await hole.requested; // the handler completed; its delete is never answered
        worker.child.kill('SIGTERM');
        await waitFor('stop() resolved in the child', () => worker.stdout().includes('STOPPED'), 10_000);
        // The unanswered delete's socket kept it alive until the SDK's socket timeout (15 minutes).
        expect(await settlesWithin('the child exited by itself', worker.exited, 10_000)).toEqual({
          status: 'fulfilled',
          value: { code: 0, signal: null },
        });
        expect(worker.stdout()).toContain('STOPPED 1');
      } finally {
        worker.child.kill('SIGKILL');
      }
    });
  },
);
