import { Idempotency, RedisIdempotencyStore, StoreUnavailableError } from '@idempotent-consumer/core';
import Redis from 'ioredis';
import { waitFor } from '../../support/net';
import { RedisServer, useFailFastRedis } from '../../support/redis-server';
import { describeWithServices } from '../../support/service';
import { BullFixture } from './fixture';

jest.setTimeout(60_000);

const TOTAL = 40;

/**
 * A worker of concurrency 4 on `fx`'s BullMQ whose records live on `storeRedis` (one try per command),
 * and 40 jobs added; resolves once 10 completed, with when each job completed.
 */
async function runningJobs(fx: BullFixture, storeRedis: Redis) {
  const queue = fx.queue();
  const store = new RedisIdempotencyStore(
    { redis: storeRedis },
    { keyPrefix: fx.keyPrefix, commandTimeoutMs: 300 },
  );
  const idempotency = new Idempotency({ store, logger: false }, { leaseMs: 2000, writeAttempts: 2 });
  const { worker, events } = fx.worker(
    queue,
    idempotency,
    { storeProbeBackoff: { baseMs: 100, maxMs: 100, jitter: 'none' } },
    async ({ key }) => {
      await new Promise((r) => setTimeout(r, 50));
      await fx.effect(key!);
      return key;
    },
    { concurrency: 4 },
  );
  const completedAt: number[] = [];
  worker.on('completed', () => completedAt.push(Date.now()));
  const ids = Array.from({ length: TOTAL }, (_, i) => `job-${i}`);
  await queue.addBulk(ids.map((id) => ({ name: 'charge', data: { id }, opts: { jobId: id } })));
  await waitFor('10 jobs completed', () => completedAt.length >= 10, 20_000, 10);
  /** Waits until every job completed, then checks none failed and each key was charged once. */
  const allOnce = async () => {
    await waitFor(
      `all ${TOTAL} completed`,
      async () => (await queue.getJobCounts('completed')).completed === TOTAL,
      40_000,
      100,
    );
    expect((await queue.getJobCounts('failed')).failed).toBe(0);
    const effects = await fx.effects();
    expect(Object.keys(effects).sort()).toEqual([...ids].sort());
    expect(Object.values(effects).every((n) => n === 1)).toBe(true);
  };
  return { queue, worker, events, ids, completedAt, allOnce };
}

describeWithServices(
  ['redis'],
  'bullmq processor: the store Redis killed and started again mid-run (BullMQ on another Redis)',
  ({ redis }) => {
    const fx = BullFixture.forSuite(redis);
    // Every write on disk before it is answered: records outlive the SIGKILL of the outage.
    const store = useFailFastRedis(['--appendonly', 'yes', '--appendfsync', 'always']);

    it('completes nothing while the store is down, pauses the worker, and runs every job once after it answers', async () => {
      const { queue, worker, events, ids, completedAt, allOnce } = await runningJobs(fx, store.redis);
      await store.server.stop();
      const downAt = Date.now();
      await waitFor('the worker paused', () => worker.isPaused(), 10_000, 20);
      // Jobs whose handler ran when the store went away wait for their COMPLETED write; none completes.
      const completedBefore = completedAt.filter((t) => t <= downAt).length;
      await new Promise((r) => setTimeout(r, 1500));
      const upAt = Date.now();
      expect(completedAt.filter((t) => t > downAt && t < upAt)).toEqual([]);
      expect((await queue.getJobCounts('failed')).failed).toBe(0);

      await store.server.restart();
      await waitFor('the worker resumed', () => !worker.isPaused(), 10_000, 20);
      await allOnce();
      expect(completedBefore).toBeGreaterThanOrEqual(10);
      expect(events.storeUnavailable).toEqual([
        { queue: queue.name, error: expect.any(StoreUnavailableError) },
      ]);
      expect(events.storeRecovered).toEqual([{ downMs: expect.any(Number) }]);
      // Jobs met the store down went back to delayed, unclaimed: no attempt of BullMQ's spent.
      const delayed = events.settled.filter((e) => e.decision.action === 'delay');
      expect(
        delayed.every((e) => e.decision.action === 'delay' && e.decision.reason === 'store-unavailable'),
      ).toBe(true);
      const jobs = await Promise.all(ids.map((id) => fx.job(queue, id)));
      expect(jobs.every((job) => job.attemptsMade === 1)).toBe(true);
    });
  },
);

describeWithServices(
  ['redis'],
  'bullmq processor: one Redis for BullMQ and the records, killed and started again mid-run',
  () => {
    let server: RedisServer;
    let fx: BullFixture;
    let storeRedis: Redis;
    beforeAll(async () => {
      server = await RedisServer.start({ args: ['--appendonly', 'yes', '--appendfsync', 'always'] });
      fx = new BullFixture(server.url);
      storeRedis = new Redis(server.url, {
        maxRetriesPerRequest: 0,
        enableOfflineQueue: false,
        retryStrategy: () => 100,
      });
    });
    afterAll(async () => {
      await fx.close();
      storeRedis.disconnect();
      await server.dispose();
    });

    it('completes nothing while it is down, and runs every job once after it answers', async () => {
      const { completedAt, allOnce } = await runningJobs(fx, storeRedis);
      await server.stop();
      const downAt = Date.now();
      await new Promise((r) => setTimeout(r, 1500));
      const upAt = Date.now();
      expect(completedAt.filter((t) => t > downAt && t < upAt)).toEqual([]);
      await server.restart();
      await allOnce();
    });
  },
);
