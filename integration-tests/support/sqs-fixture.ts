import type { SQSClient } from '@aws-sdk/client-sqs';
import { Idempotency, type IdempotencyOptions, RedisIdempotencyStore } from '@idempotent-consumer/core';
import Redis from 'ioredis';
import { createQueue, deleteQueues, sqsClient, uniqueQueueName } from './sqs-helpers';

/**
 * Per-suite plumbing of the SQS suites: a Redis client on the discovered Redis, an SQS client on the
 * discovered endpoint, fresh queues per test, a runner with a unique key prefix, and side-effect counters
 * kept in Redis (HINCRBY), so a side effect run by a child process counts too.
 */
export class SqsFixture {
  readonly redis: Redis;
  readonly sqs: SQSClient;
  readonly prefix = `sqs-it-${process.pid}-${Date.now()}`;
  readonly #queues: string[] = [];
  /** The stores {@link SqsFixture.idempotency} made: `close` closes their outcome-notification connections. */
  readonly #stores: RedisIdempotencyStore[] = [];
  #n = 0;

  /** The clients connect on first use (`lazyConnect`), so a fixture no test used opens no socket. */
  constructor(redisUrl: string, sqsEndpoint: string) {
    this.redis = new Redis(redisUrl, { maxRetriesPerRequest: 2, lazyConnect: true });
    this.sqs = sqsClient(sqsEndpoint);
  }

  /**
   * The fixture of a suite, closed (its queues deleted, its clients closed) after all its tests. Call it in
   * a `describe` body; an `afterAll` the suite declared before this call runs before the close.
   */
  static forSuite(redisUrl: string, sqsEndpoint: string): SqsFixture {
    const fx = new SqsFixture(redisUrl, sqsEndpoint);
    afterAll(() => fx.close());
    return fx;
  }

  /** A runner on a store with a fresh key prefix. */
  idempotency(options: IdempotencyOptions = {}, redis: Redis = this.redis): Idempotency {
    this.#n += 1;
    const store = new RedisIdempotencyStore(
      { redis },
      { keyPrefix: `${this.prefix}-${this.#n}`, commandTimeoutMs: 500 },
    );
    this.#stores.push(store);
    return new Idempotency({ store }, options);
  }

  /**
   * Creates a queue that is deleted after the suite. Unless `attributes` has a `RedrivePolicy` or
   * `redrive` is false, the queue gets one to a dead-letter queue of its own with `maxReceiveCount` 1000,
   * as the adapter's default `deadLetter: 'redrive-policy'` requires (it refuses to start without one) and
   * as a production queue has; 1000 receives are never reached by these tests.
   */
  async queue(
    prefix: string,
    attributes: Record<string, string> = {},
    fifo = false,
    { redrive = true }: { redrive?: boolean } = {},
  ): Promise<{ url: string; arn: string }> {
    let all = attributes;
    if (redrive && attributes.RedrivePolicy === undefined) {
      const dlq = await this.queue(`${prefix}-dlq`, {}, fifo, { redrive: false });
      all = {
        ...attributes,
        RedrivePolicy: JSON.stringify({ deadLetterTargetArn: dlq.arn, maxReceiveCount: '1000' }),
      };
    }
    const q = await createQueue(this.sqs, uniqueQueueName(prefix, fifo), all);
    this.#queues.push(q.url);
    return q;
  }

  /** The Redis hash that counts side effects of one test. */
  counter(name: string): string {
    return `${this.prefix}:effects:${name}`;
  }

  /** Counts one side effect of `key` (HINCRBY) and returns the new count. */
  effect(counter: string, key: string): Promise<number> {
    return this.redis.hincrby(counter, key, 1);
  }

  /** Side effects per key. */
  async effects(counter: string): Promise<Record<string, number>> {
    const raw = await this.redis.hgetall(counter);
    return Object.fromEntries(Object.entries(raw).map(([k, v]) => [k, Number(v)]));
  }

  async close(): Promise<void> {
    await deleteQueues(this.sqs, this.#queues);
    this.sqs.destroy();
    // A store that waited on a conflict holds a subscriber connection of its own for a second after the
    // last wait: closed here, or it keeps the Jest worker alive after the last test.
    for (const store of this.#stores.splice(0)) store.close();
    await this.redis.quit();
  }
}
