import {
  type BullMqHandler,
  type BullMqIdempotencyEvents,
  type BullMqIdempotencyOptions,
  type IdempotentProcessor,
  idempotentProcessor,
} from '@idempotent-consumer/bullmq';
import { Idempotency, type IdempotencyOptions, RedisIdempotencyStore } from '@idempotent-consumer/core';
import { connectionOf } from '@idempotent-consumer/demo/dist/brokers/bullmq';
import { type ConnectionOptions, type Job, Queue, Worker, type WorkerOptions } from 'bullmq';
import Redis from 'ioredis';

let counter = 0;

/** A name no other run or test uses: `ic-bull-<label>-<pid>-<time>-<n>`. */
export function uniqueName(label: string): string {
  counter += 1;
  return `ic-bull-${label}-${process.pid}-${Date.now().toString(36)}-${counter}`;
}

/** Short BullMQ timings: a killed worker's job is found stalled within about 2 s. */
export const FAST_WORKER: Partial<WorkerOptions> = { lockDuration: 2000, stalledInterval: 500 };

/** Every event a processor emitted, by name, in order. */
export type EventLog = { [K in keyof BullMqIdempotencyEvents]: BullMqIdempotencyEvents[K][0][] };

const EVENT_NAMES: (keyof BullMqIdempotencyEvents)[] = [
  'settled',
  'retryScheduled',
  'deadLettered',
  'missingKey',
  'invalidKey',
  'leaseLost',
  'storeUnavailable',
  'storeRecovered',
  'storeError',
  'brokerError',
];

/** Records every event of a processor. */
export function recordEvents(processor: IdempotentProcessor<unknown, unknown>): EventLog {
  const log = Object.fromEntries(EVENT_NAMES.map((n) => [n, []])) as unknown as EventLog;
  for (const name of EVENT_NAMES) processor.events.on(name, (e: unknown) => (log[name] as unknown[]).push(e));
  return log;
}

/**
 * One suite's BullMQ world on real Redis: a BullMQ key prefix and an idempotency key prefix of its own, a
 * Redis hash counting side effects per key, and cleanup that closes every worker and queue, obliterates
 * the queues and deletes the suite's keys. BullMQ may use the shared Redis while the records live on
 * another (`storeUrl`).
 */
export class BullFixture {
  readonly prefix = uniqueName('q');
  readonly keyPrefix = uniqueName('idem');
  readonly effectsKey = uniqueName('effects');
  readonly connection: ConnectionOptions;
  readonly redis: Redis;
  readonly #queues: Queue[] = [];
  readonly #workers: Worker[] = [];

  constructor(readonly bullUrl: string) {
    this.connection = connectionOf(bullUrl);
    // Connects on its first command: a skipped suite opens nothing.
    this.redis = new Redis(bullUrl, { lazyConnect: true });
  }

  /** A fixture for a suite, closed after it. */
  static forSuite(bullUrl: string): BullFixture {
    const fx = new BullFixture(bullUrl);
    afterAll(() => fx.close());
    return fx;
  }

  /** A queue of the fixture's prefix; its name is unique unless given. */
  queue(name = uniqueName('work')): Queue {
    const queue = new Queue(name, { connection: this.connection, prefix: this.prefix });
    queue.on('error', () => {}); // a Redis the test stops: BullMQ would print each reconnect's error
    this.#queues.push(queue);
    return queue;
  }

  /** A runner whose records live under the fixture's key prefix, on `redis` (the fixture's by default). */
  idempotency(options: IdempotencyOptions = {}, redis: Redis = this.redis): Idempotency {
    const store = new RedisIdempotencyStore({ redis }, { keyPrefix: this.keyPrefix });
    return new Idempotency({ store, logger: false }, { leaseMs: 2000, ...options });
  }

  /** A processor and the worker it is attached to, with every event recorded. */
  worker<T, D = unknown>(
    queue: Queue,
    idempotency: Idempotency,
    options: BullMqIdempotencyOptions,
    handler: BullMqHandler<T, D>,
    workerOptions: Partial<WorkerOptions> = {},
  ): { processor: IdempotentProcessor<T, D>; worker: Worker; events: EventLog } {
    const processor = idempotentProcessor<T, D>({ idempotency, logger: false }, options, handler);
    const events = recordEvents(processor as IdempotentProcessor<unknown, unknown>);
    const worker = new Worker<D, T>(queue.name, processor, {
      connection: this.connection,
      prefix: this.prefix,
      ...FAST_WORKER,
      ...workerOptions,
    });
    worker.on('error', () => {}); // a Redis outage is reported through the processor's events
    processor.attach(worker);
    this.#workers.push(worker as Worker);
    return { processor, worker: worker as Worker, events };
  }

  /** One side effect of `key`, counted in the fixture's hash. */
  async effect(key: string): Promise<void> {
    await this.redis.hincrby(this.effectsKey, key, 1);
  }

  /** Forgets the side effects counted so far (a test of a suite starts at none). */
  async resetEffects(): Promise<void> {
    await this.redis.del(this.effectsKey);
  }

  /** The side effects so far, by key. */
  async effects(): Promise<Record<string, number>> {
    const all = await this.redis.hgetall(this.effectsKey);
    return Object.fromEntries(Object.entries(all).map(([k, v]) => [k, Number(v)]));
  }

  /** The states of `ids` in `queue`. */
  async states(queue: Queue, ids: readonly string[]): Promise<string[]> {
    return Promise.all(ids.map(async (id) => (await queue.getJob(id))?.getState() ?? 'missing'));
  }

  /** The job `id` of `queue`, which must exist. */
  async job(queue: Queue, id: string): Promise<Job> {
    const job = await queue.getJob(id);
    if (!job) throw new Error(`job ${id} is not in ${queue.name}`);
    return job;
  }

  async close(): Promise<void> {
    await Promise.allSettled(this.#workers.splice(0).map((w) => w.close(true)));
    for (const queue of this.#queues.splice(0)) {
      await queue.obliterate({ force: true }).catch(() => {});
      await queue.close().catch(() => {});
    }
    for (const pattern of [`${this.keyPrefix}*`, `${this.prefix}*`]) {
      let cursor = '0';
      do {
        const [next, keys] = await this.redis.scan(cursor, 'MATCH', pattern, 'COUNT', 500);
        cursor = next;
        if (keys.length > 0) await this.redis.del(...keys);
      } while (cursor !== '0');
    }
    await this.redis.del(this.effectsKey);
    this.redis.disconnect();
  }
}
