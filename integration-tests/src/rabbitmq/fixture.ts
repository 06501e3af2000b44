import {
  Idempotency,
  type IdempotencyOptions,
  type IdempotencyStore,
  RedisIdempotencyStore,
} from '@idempotent-consumer/core';
import {
  createIdempotentConsumer,
  type IdempotentConsumer,
  type RabbitMqHandler,
  type RabbitMqIdempotencyDependencies,
  type RabbitMqIdempotencyEvents,
  type RabbitMqIdempotencyOptions,
} from '@idempotent-consumer/rabbitmq';
import { type Channel, type ChannelModel, connect, type GetMessage, type Options } from 'amqplib';
import Redis from 'ioredis';
import { waitFor } from '../../support/net';

let counter = 0;

/** A name no other run or test uses: `ic-rmq-<label>-<pid>-<time>-<n>`. */
export function uniqueName(label: string): string {
  counter += 1;
  return `ic-rmq-${label}-${process.pid}-${Date.now().toString(36)}-${counter}`;
}

/** Fast settings for tests: short delay tiers, short backoff, short lease. */
export const FAST: Partial<RabbitMqIdempotencyOptions> = {
  delayTiersMs: [100, 300, 1000],
  retryBackoff: { baseMs: 100, factor: 2, maxMs: 300, jitter: 'none' },
  storeProbeBackoff: { baseMs: 100, factor: 2, maxMs: 400, jitter: 'none' },
  prefetch: 4,
};

/** Every event a consumer emitted, by name, in order. */
export type EventLog = { [K in keyof RabbitMqIdempotencyEvents]: RabbitMqIdempotencyEvents[K][0][] };

const EVENT_NAMES: (keyof RabbitMqIdempotencyEvents)[] = [
  'delivery',
  'settled',
  'retryScheduled',
  'deadLettered',
  'missingKey',
  'leaseLost',
  'storeUnavailable',
  'storeRecovered',
  'brokerError',
  'started',
  'stopped',
  'channelClosed',
  'reconnected',
  'cancelled',
];

/** The `settled` events whose decision was `ack`. */
export const acks = (log: EventLog) => log.settled.filter((e) => e.decision.action === 'ack');

/** The `settled` events whose decision was `requeue`. */
export const requeues = (log: EventLog) => log.settled.filter((e) => e.decision.action === 'requeue');

/** Records every event of a consumer. */
export function recordEvents(consumer: IdempotentConsumer<unknown>): EventLog {
  const log = Object.fromEntries(EVENT_NAMES.map((n) => [n, []])) as unknown as EventLog;
  for (const name of EVENT_NAMES) {
    const listener = (event: unknown) => (log[name] as unknown[]).push(event);
    consumer.on(name, listener as never);
  }
  return log;
}

/**
 * One test's world: a work queue with a unique name, an AMQP connection, an idempotency store on Redis
 * under a unique key prefix, a Redis hash that counts side effects, and cleanup that stops consumers and
 * deletes every queue, exchange and Redis key of the test. {@link RabbitFixture.open} opens it (with new
 * names each time), {@link RabbitFixture.close} cleans up; {@link RabbitFixture.eachTest} does both around
 * each test of a suite.
 */
export class RabbitFixture {
  /** The work queue (new at each {@link RabbitFixture.open}). */
  queue = uniqueName('work');
  /** The key prefix of the idempotency store (new at each {@link RabbitFixture.open}). */
  prefix = uniqueName('idem');
  /** The Redis hash of side effects per key ({@link RabbitFixture.effect}), deleted by `close`. */
  effectsKey = uniqueName('effects');
  readonly consumers: IdempotentConsumer<unknown>[] = [];
  readonly extraQueues: string[] = [];
  readonly extraExchanges: string[] = [];
  /** The stores {@link RabbitFixture.idempotency} made: `close` closes their outcome-notification connections. */
  readonly #stores: RedisIdempotencyStore[] = [];
  connection!: ChannelModel;
  channel!: Channel;
  redis!: Redis;

  constructor(
    readonly amqpUrl: string,
    readonly redisUrl: string,
  ) {}

  /**
   * Registers the hooks that give each test of the suite the returned fixture: opened anew (new queue, key
   * prefix and effects hash) before each test, closed after it. An `afterEach` the suite declared before
   * this call runs before the close.
   */
  static eachTest(urls: { rabbitmq: string; redis: string }): RabbitFixture {
    const fx = new RabbitFixture(urls.rabbitmq, urls.redis);
    beforeEach(() => fx.open());
    afterEach(() => fx.close());
    return fx;
  }

  async open(): Promise<this> {
    this.queue = uniqueName('work');
    this.prefix = uniqueName('idem');
    this.effectsKey = uniqueName('effects');
    this.consumers.length = 0;
    this.extraQueues.length = 0;
    this.extraExchanges.length = 0;
    this.connection = await connect(this.amqpUrl);
    this.channel = await this.connection.createChannel();
    this.channel.on('error', () => {});
    this.redis = new Redis(this.redisUrl, { lazyConnect: false });
    await this.channel.assertQueue(this.queue, { durable: false });
    return this;
  }

  /** An idempotency runner on a store in the fixture's Redis (or `store`). */
  idempotency(options: IdempotencyOptions = {}, store?: IdempotencyStore): Idempotency {
    if (!store) {
      const own = new RedisIdempotencyStore({ redis: this.redis }, { keyPrefix: this.prefix });
      this.#stores.push(own);
      store = own;
    }
    return new Idempotency({ store }, { leaseMs: 1000, ...options });
  }

  /**
   * Creates, records and starts a consumer on the work queue with {@link FAST} settings, on the fixture's
   * connection unless `dependencies` say otherwise.
   */
  async consumer<T>(
    idempotency: Idempotency,
    options: Partial<RabbitMqIdempotencyOptions>,
    handler: RabbitMqHandler<T>,
    dependencies: Omit<RabbitMqIdempotencyDependencies, 'idempotency'> = { connection: this.connection },
  ): Promise<{ consumer: IdempotentConsumer<T>; events: EventLog }> {
    const consumer = createIdempotentConsumer<T>(
      { idempotency, ...dependencies },
      { ...FAST, queue: this.queue, ...options },
      handler,
    );
    this.consumers.push(consumer as IdempotentConsumer<unknown>);
    const events = recordEvents(consumer as IdempotentConsumer<unknown>);
    await consumer.start();
    return { consumer, events };
  }

  /** Publishes JSON to the work queue (default exchange), persistent. */
  publish(body: unknown, properties: Options.Publish = {}): void {
    this.channel.sendToQueue(this.queue, Buffer.from(JSON.stringify(body)), {
      contentType: 'application/json',
      ...properties,
    });
  }

  /** Waits until `count` messages sit in the dead-letter queue, then takes them all. */
  async deadLetters(count: number, timeoutMs = 10_000): Promise<GetMessage[]> {
    const dlq = `${this.queue}.dlq`;
    const messages: GetMessage[] = [];
    await waitFor(
      `${count} messages in ${dlq}`,
      async () => {
        for (;;) {
          const m = await this.channel.get(dlq, { noAck: true });
          if (m === false) break;
          messages.push(m);
        }
        return messages.length >= count;
      },
      timeoutMs,
    );
    return messages;
  }

  /** Counts one side effect of `key` in {@link RabbitFixture.effectsKey} (HINCRBY). */
  async effect(key: string): Promise<void> {
    await this.redis.hincrby(this.effectsKey, key, 1);
  }

  /** Side effects per key, as Redis returns them (counts as strings). */
  effects(): Promise<Record<string, string>> {
    return this.redis.hgetall(this.effectsKey);
  }

  /**
   * Waits until `count` keys had their side effect (within `handledTimeoutMs`), then until `count` keys
   * were acked in `events` (within `ackedTimeoutMs`); resolves with the side effects per key.
   */
  async allDone(
    events: EventLog,
    count: number,
    handledTimeoutMs: number,
    ackedTimeoutMs?: number,
  ): Promise<Record<string, string>> {
    await waitFor(
      'every message to be handled',
      async () => Object.keys(await this.effects()).length === count,
      handledTimeoutMs,
    );
    await waitFor(
      'every message to be acked',
      () => new Set(acks(events).map((e) => e.key)).size === count,
      ackedTimeoutMs,
    );
    return this.effects();
  }

  /** Ready messages in a queue. */
  async depth(queue = this.queue): Promise<number> {
    return (await this.channel.checkQueue(queue)).messageCount;
  }

  async close(): Promise<void> {
    await Promise.allSettled(this.consumers.map((c) => c.stop()));
    const queues = new Set<string>([this.queue, `${this.queue}.dlq`, ...this.extraQueues]);
    for (const c of this.consumers) {
      for (const t of c.topology.delayTiers) queues.add(t.queue);
      if (c.topology.deadLetterQueue) queues.add(c.topology.deadLetterQueue);
    }
    const exchanges = new Set<string>([`${this.queue}.dlx`, ...this.extraExchanges]);
    for (const c of this.consumers) exchanges.add(c.topology.deadLetterExchange);
    // Each delete on its own channel: deleting something that does not exist is fine in RabbitMQ 3.x, but
    // a channel error must not stop the cleanup of the rest.
    const cleanup = await this.connection.createChannel();
    cleanup.on('error', () => {});
    for (const q of queues) await cleanup.deleteQueue(q).catch(() => {});
    for (const e of exchanges) await cleanup.deleteExchange(e).catch(() => {});
    await cleanup.close().catch(() => {});
    const keys = await this.redis.keys(`${this.prefix}:*`);
    if (keys.length > 0) await this.redis.del(...keys);
    await this.redis.del(this.effectsKey);
    await this.connection.close().catch(() => {});
    // A store that waited on a conflict holds a subscriber connection of its own for a second after the
    // last wait: closed here, or it keeps the Jest worker alive after the last test.
    for (const store of this.#stores.splice(0)) store.close();
    this.redis.disconnect();
  }
}

/** Resolves after `ms` (only to hold an interval during which the test asserts that nothing happens). */
export const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));
