import type { Message } from '@aws-sdk/client-sqs';
import {
  Idempotency,
  type IdempotencyRecord,
  RedisIdempotencyStore,
  StoreUnavailableError,
} from '@idempotent-consumer/core';
import { IdempotentSqsPoller, type SqsIdempotencyEvents } from '@idempotent-consumer/sqs';
import Redis from 'ioredis';
import { settlesWithin, waitFor } from '../../support/net';
import { RedisServer } from '../../support/redis-server';
import { describeWithServices } from '../../support/service';
import { SqsFixture } from '../../support/sqs-fixture';
import { queueDepth, sendMessage } from '../../support/sqs-helpers';

jest.setTimeout(60_000);

/** The lease of the give-back test: the visibility change before its handler is answered after it. */
const LEASE_MS = 3000;

describeWithServices(
  ['redis', 'sqs'],
  'sqs poller with Redis stopped and started mid-run',
  ({ redis, sqs }) => {
    let fx: SqsFixture;
    let server: RedisServer;
    let storeRedis: Redis;
    beforeAll(async () => {
      fx = new SqsFixture(redis, sqs);
      // Every write on disk before it is answered: records outlive the SIGKILL of an outage.
      server = await RedisServer.start({ args: ['--appendonly', 'yes', '--appendfsync', 'always'] });
      storeRedis = new Redis(server.url, {
        maxRetriesPerRequest: 0,
        enableOfflineQueue: false,
        retryStrategy: () => 100,
      });
    });
    afterAll(async () => {
      storeRedis.disconnect();
      await server.dispose();
      await fx.close();
    });

    it('deletes nothing while Redis is down, pauses polling, and resumes once it answers', async () => {
      const q = await fx.queue('outage');
      const counter = fx.counter('outage');
      const idempotency = new Idempotency(
        {
          store: new RedisIdempotencyStore(
            { redis: storeRedis },
            { keyPrefix: 'outage', commandTimeoutMs: 300 },
          ),
        },
        { leaseMs: 2000, writeAttempts: 2 },
      );
      const processed: SqsIdempotencyEvents['settled'][0][] = [];
      const downErrors: unknown[] = [];
      const events: string[] = [];
      const poller = new IdempotentSqsPoller(
        { idempotency, sqs: fx.sqs },
        {
          queueUrl: q.url,
          waitTimeSeconds: 1,
          concurrency: 4,
          storeProbeBackoff: { baseMs: 100, maxMs: 100 },
        },
        async ({ key }) => {
          await fx.effect(counter, key!);
        },
      );
      poller.on('settled', (p) => processed.push(p));
      // Every ReceiveMessage the poller sends, with whether polling was paused when it sent it.
      const receivesSentPaused: boolean[] = [];
      fx.sqs.middlewareStack.add(
        (next, context) => (args) => {
          if (context.commandName === 'ReceiveMessageCommand') receivesSentPaused.push(poller.paused);
          return next(args);
        },
        { step: 'initialize', name: 'recordReceives' },
      );
      poller.on('storeUnavailable', ({ error }) => {
        events.push('down');
        downErrors.push(error);
      });
      poller.on('storeRecovered', () => events.push('up'));
      let deletesWhileDown = 0;
      poller.on('settled', ({ decision }) => {
        if (decision.action === 'delete' && events.at(-1) === 'down') deletesWhileDown += 1;
      });
      poller.start();
      try {
        for (let i = 0; i < 3; i++) await sendMessage(fx.sqs, q.url, `before-${i}`, { key: `before-${i}` });
        await waitFor(
          '3 deleted',
          () => processed.filter((p) => p.decision.action === 'delete').length === 3,
        );

        await server.stop();
        for (let i = 0; i < 3; i++) await sendMessage(fx.sqs, q.url, `during-${i}`, { key: `during-${i}` });
        await waitFor('polling paused', () => poller.paused);
        const left = processed.filter((p) => p.decision.reason === 'store-unavailable');
        expect(left.length).toBeGreaterThan(0);
        expect(left.every((p) => p.decision.action === 'leave')).toBe(true);
        // The batch claim met the store down: the event carries the store's error.
        expect(downErrors).toEqual([expect.any(StoreUnavailableError)]);
        // Paused: no receive is sent, so the messages stay on the queue. A long poll sent before the pause
        // may still hand over messages after it (on a busy machine the three arrive in two receives): they
        // meet the store down too and are left, not deleted.
        const receivesBefore = receivesSentPaused.length;
        expect(receivesBefore).toBeGreaterThan(0); // the recording sees the poller's receives
        await new Promise((r) => setTimeout(r, 1500));
        expect(receivesSentPaused.slice(receivesBefore)).toEqual([]);
        expect(receivesSentPaused.filter((paused) => paused)).toEqual([]);
        expect(processed.slice(3).map(({ decision: d }) => ({ action: d.action, reason: d.reason }))).toEqual(
          processed.slice(3).map(() => ({ action: 'leave', reason: 'store-unavailable' })),
        );
        expect(await queueDepth(fx.sqs, q.url)).toBe(3);

        await server.restart();
        await waitFor('polling resumed', () => !poller.paused, 10_000);
        await waitFor(
          'the 3 messages sent during the outage deleted',
          async () => (await queueDepth(fx.sqs, q.url)) === 0,
          20_000,
          200,
        );
      } finally {
        await poller.stop();
        fx.sqs.middlewareStack.remove('recordReceives');
      }
      expect(events).toEqual(['down', 'up']);
      expect(deletesWhileDown).toBe(0);
      const effects = await fx.effects(counter);
      expect(Object.keys(effects).sort()).toEqual([
        'before-0',
        'before-1',
        'before-2',
        'during-0',
        'during-1',
        'during-2',
      ]);
      expect(Object.values(effects).every((n) => n === 1)).toBe(true);
    });

    it('stop() during a start() whose Redis client is still connecting (Redis accepts, never answers) resolves within the command timeout', async () => {
      await server.withStoreStillConnecting(async (idempotency) => {
        const poller = new IdempotentSqsPoller(
          { idempotency, sqs: fx.sqs, logger: false },
          // Never asked: the stop comes before the start's dead-letter check.
          { queueUrl: `${sqs}/000000000000/never-asked`, waitTimeSeconds: 0 },
          () => 1,
        );
        let started = false;
        poller.on('started', () => {
          started = true;
        });
        const starting = poller.start();
        // The SIGTERM of a rolling deploy during that start: stop() is documented to wait for the start
        // at most the store's command timeout (500 ms). It waited for the connect wait of the store check
        // (5 s) and then the PING's own timeout.
        const stopped = await settlesWithin('stop()', poller.stop(), 2_500);
        expect(stopped).toEqual({ status: 'fulfilled', value: { abandoned: 0 } });
        await expect(starting).resolves.toBe(poller);
        expect(started).toBe(false);
        expect(poller.running).toBe(false);
      });
    });

    it('a counted claim whose handler never started because Redis stopped answering is given back once Redis answers: attempt returned, the next claim ACQUIRED, not ACQUIRED_STALE', async () => {
      const q = await fx.queue('give-back');
      const dlq = await fx.queue('give-back-dlq', {}, false, { redrive: false });
      const idempotency = new Idempotency(
        {
          store: new RedisIdempotencyStore(
            { redis: storeRedis },
            { keyPrefix: `${fx.prefix}-give-back`, commandTimeoutMs: 300 },
          ),
          logger: false,
        },
        { leaseMs: LEASE_MS },
      );
      const ran: string[] = [];
      const settled: SqsIdempotencyEvents['settled'][0][] = [];
      const events: string[] = [];
      const received: string[][] = [];
      const poller = new IdempotentSqsPoller(
        { idempotency, sqs: fx.sqs, logger: false },
        {
          queueUrl: q.url,
          scope: 'give-back',
          deadLetter: { queueUrl: dlq.url },
          waitTimeSeconds: 1,
          concurrency: 4,
          // At most a heartbeat (1 s) + 1 s: the poller extends the visibility of a message before its
          // handler (an SQS request between the claim and the handler).
          visibilityTimeoutSeconds: 2,
          storeProbeBackoff: { baseMs: 100, maxMs: 100 },
        },
        async ({ key }) => {
          ran.push(key!);
        },
      );
      poller.on('settled', (p) => settled.push(p));
      poller.on('storeUnavailable', () => events.push('down'));
      poller.on('storeRecovered', () => events.push('up'));
      // The visibility change before k2's handler: Redis is killed while it is in flight, and it is answered
      // only once k2's lease (counted from its claim, before this request) has run out, so the runner must
      // extend the lease before the handler starts, and that extension meets Redis down: no handler runs.
      // The change asks for 60 s instead of the lease, so SQS does not hand the message out again during
      // the test (the poller's redelivery would race the give-back this test waits for).
      let receipt: string | undefined;
      poller.on('received', ({ messages }) => {
        received.push(messages.map((m: Message) => m.Body!));
        receipt ??= messages.find((m: Message) => m.Body === 'k2')?.ReceiptHandle;
      });
      fx.sqs.middlewareStack.add(
        (next, context) => async (args) => {
          const input = args.input as { Entries?: { ReceiptHandle?: string; VisibilityTimeout?: number }[] };
          if (
            context.commandName !== 'ChangeMessageVisibilityBatchCommand' ||
            receipt === undefined ||
            !input.Entries?.some((e) => e.ReceiptHandle === receipt)
          ) {
            return next(args);
          }
          receipt = undefined; // once
          const entered = performance.now();
          for (const entry of input.Entries) entry.VisibilityTimeout = 60;
          const out = await next(args);
          await server.stop();
          const leftMs = entered + LEASE_MS + 100 - performance.now();
          if (leftMs > 0) await new Promise((r) => setTimeout(r, leftMs));
          return out;
        },
        { step: 'initialize', name: 'killRedisBeforeHandler' },
      );
      const record = (key: string): Promise<IdempotencyRecord | null> =>
        idempotency.store.get({ scope: 'give-back', key });
      // A key longer than the store accepts (512 bytes): the batch cannot be claimed in one round trip, so
      // each message claims on its own, k2 with a counted claim (as a FIFO group's later message does).
      await sendMessage(fx.sqs, q.url, 'bad', { key: 'x'.repeat(600) });
      await sendMessage(fx.sqs, q.url, 'k2', { key: 'k2' });
      poller.start();
      try {
        await waitFor('k2 left (store unavailable)', () => settled.some((s) => s.key === 'k2'), 20_000);
        expect(received[0]?.sort()).toEqual(['bad', 'k2']);
        expect(ran).toEqual([]);
        expect(settled.find((s) => s.key === 'k2')!.decision).toMatchObject({
          action: 'leave',
          reason: 'store-unavailable',
        });

        await server.restart();
        await waitFor('the store answers again', () => events.includes('up'), 10_000);
        // The give-back follows the gate's opening by one round trip; bounded, then the record is asserted
        // (before the fix it stayed IN_PROGRESS with the attempt spent, and the next claim was stale).
        await waitFor('k2 released', async () => (await record('k2'))?.state === 'RELEASED', 5_000).catch(
          () => {},
        );
        expect(await record('k2')).toMatchObject({ state: 'RELEASED', attempt: 0, abandoned: false });
      } finally {
        await poller.stop();
        fx.sqs.middlewareStack.remove('killRedisBeforeHandler');
      }
      expect(ran).toEqual([]);
      // The next delivery's claim: a fresh first attempt, not a stale second one.
      const again = await idempotency.claim({ scope: 'give-back', key: 'k2' });
      expect(again).toMatchObject({ outcome: 'ACQUIRED', attempt: 1 });
      expect(events).toEqual(['down', 'up']);
    });
  },
);
