/**
 * The demo on BullMQ: the producer adds one job per payment message to a queue on the demo's Redis, with
 * the idempotency key as `jobId` and `removeOnComplete`, as a BullMQ producer that wants no duplicates
 * would. BullMQ drops a duplicate whose first job is still in the queue, and runs one added after the
 * first completed. Each consumer process runs a `Worker` whose processor is `idempotentProcessor` (`sdk`)
 * or the charge alone (`naive`); both retry a gateway timeout with the job's `attempts`.
 */
import { idempotentProcessor } from '@idempotent-consumer/bullmq';
import { type ConnectionOptions, type Job, Queue, Worker } from 'bullmq';
import type { DemoBroker, DemoConsumerContext, DemoMode, PaymentMessage } from '../broker';

/** Where BullMQ keeps its queues: the demo's Redis (`REDIS_URL`), also the records'. */
const redisUrl = () => process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';

/** BullMQ's connection options for a `redis://` URL (the bench and the integration suites use it too). */
export function connectionOf(url: string): ConnectionOptions {
  const u = new URL(url);
  return {
    host: u.hostname,
    port: Number(u.port || 6379),
    ...(u.password ? { password: decodeURIComponent(u.password) } : {}),
    ...(u.pathname.length > 1 ? { db: Number(u.pathname.slice(1)) } : {}),
    maxRetriesPerRequest: null,
  };
}

/** The BullMQ key prefix of the demo's queues. */
const PREFIX = 'demo-bull';

/** Every job retries a gateway timeout, 250 ms apart: the naive consumer's only protection. */
const JOB_OPTIONS = { removeOnComplete: true, attempts: 10, backoff: { type: 'fixed', delay: 250 } };

/** The producer side: one queue per run. */
export function bullmqBroker(): DemoBroker {
  let queue: Queue | undefined;
  return {
    name: 'bullmq',
    // BullMQ runs on the demo's Redis, which cli.ts checks before this.
    async preflight() {
      return null;
    },
    async setup(runId: string, _mode: DemoMode) {
      const name = `payments-${runId}`;
      queue = new Queue(name, { connection: connectionOf(redisUrl()), prefix: PREFIX });
      return { redisUrl: redisUrl(), queue: name };
    },
    async publish(messages: readonly PaymentMessage[]) {
      if (!queue) throw new Error('setup() first');
      await queue.addBulk(
        messages.map((m) => ({ name: 'charge', data: m, opts: { ...JOB_OPTIONS, jobId: m.idempotencyKey } })),
      );
    },
    async teardown() {
      const q = queue;
      queue = undefined;
      await q?.obliterate({ force: true }).catch(() => {});
      await q?.close().catch(() => {});
    },
    async close() {},
  };
}

/** The consumer side, in one consumer process. */
export async function startConsumer(context: DemoConsumerContext): Promise<{ stop(): Promise<void> }> {
  const { queue, redisUrl: url } = context.config;
  if (!queue || !url) throw new Error('The bullmq demo consumer needs config.queue and config.redisUrl');
  const { counters } = context;
  const charge = (job: Job<PaymentMessage>, fencingToken?: number) => context.charge(job.data, fencingToken);
  const leaseMs = context.idempotency?.options.leaseMs ?? 3000;
  // A killed consumer's jobs are found stalled within about a lease and run elsewhere.
  const options = {
    connection: connectionOf(url),
    prefix: PREFIX,
    concurrency: 8,
    lockDuration: leaseMs,
    stalledInterval: 1000,
  };
  let worker: Worker<PaymentMessage>;
  if (context.mode === 'sdk') {
    if (!context.idempotency) throw new Error('sdk mode needs context.idempotency');
    const processor = idempotentProcessor<void, PaymentMessage>(
      { idempotency: context.idempotency },
      { maxConflictDelayMs: 1000 },
      ({ job, fencingToken }) => charge(job, fencingToken),
    );
    processor.events.on('deadLettered', () => counters.deadLettered++);
    worker = processor.attach(new Worker<PaymentMessage>(queue, processor, options));
  } else {
    worker = new Worker<PaymentMessage>(queue, (job) => charge(job), options);
  }
  worker.on('active', () => counters.deliveries++);
  worker.on('error', () => {});
  await worker.waitUntilReady();
  return {
    async stop() {
      await worker.close();
    },
  };
}
