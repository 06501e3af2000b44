import {
  Idempotency,
  type IdempotencyOptions,
  type IdempotencyStore,
  RedisIdempotencyStore,
} from '@idempotent-consumer/core';
import {
  type NatsHandler,
  type NatsIdempotencyEvents,
  type NatsIdempotencyOptions,
  NatsIdempotentConsumer,
} from '@idempotent-consumer/nats';
import {
  AckPolicy,
  type JetStreamClient,
  type JetStreamManager,
  type JsMsg,
  jetstream,
  jetstreamManager,
} from '@nats-io/jetstream';
import { headers, type NatsConnection } from '@nats-io/nats-core';
import { connect } from '@nats-io/transport-node';
import Redis from 'ioredis';
import { waitFor } from '../../support/net';

let counter = 0;

/** A stream or key name no other run or test uses (letters, digits and `_` only, as streams need). */
export function uniqueName(label: string): string {
  counter += 1;
  return `ic_nats_${label}_${process.pid}_${Date.now().toString(36)}_${counter}`;
}

/** Fast settings for tests: short backoffs. */
export const FAST: Partial<NatsIdempotencyOptions> = {
  retryBackoff: { baseMs: 100, factor: 2, maxMs: 300, jitter: 'none' },
  storeProbeBackoff: { baseMs: 100, factor: 2, maxMs: 400, jitter: 'none' },
  concurrency: 4,
  telemetry: false,
};

/** Every event a consumer emitted, by name, in order. */
export type EventLog = { [K in keyof NatsIdempotencyEvents]: NatsIdempotencyEvents[K][0][] };

const EVENT_NAMES: (keyof NatsIdempotencyEvents)[] = [
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
  'started',
  'stopped',
];

/** Records every event of a consumer. */
export function recordEvents(consumer: NatsIdempotentConsumer<unknown>): EventLog {
  const log = Object.fromEntries(EVENT_NAMES.map((n) => [n, []])) as unknown as EventLog;
  for (const name of EVENT_NAMES)
    consumer.on(name, ((e: unknown) => (log[name] as unknown[]).push(e)) as never);
  return log;
}

/** The `settled` events whose decision was `ack`. */
export const acks = (log: EventLog) => log.settled.filter((e) => e.decision.action === 'ack');

/**
 * One test's world: a work stream and a dead-letter stream with unique names, a durable pull consumer,
 * an idempotency store under a unique key prefix, a Redis hash that counts side effects, and cleanup that
 * stops consumers and deletes both streams and every Redis key of the test.
 */
export class NatsFixture {
  stream = uniqueName('work');
  prefix = uniqueName('idem');
  effectsKey = uniqueName('effects');
  readonly consumers: NatsIdempotentConsumer<unknown>[] = [];
  readonly #stores: RedisIdempotencyStore[] = [];
  nc!: NatsConnection;
  js!: JetStreamClient;
  jsm!: JetStreamManager;
  redis!: Redis;

  constructor(
    readonly natsUrl: string,
    readonly redisUrl: string,
  ) {}

  /** Opens a new fixture before each test of the suite and closes it after. */
  static eachTest(urls: { nats: string; redis: string }): NatsFixture {
    const fx = new NatsFixture(urls.nats, urls.redis);
    beforeEach(() => fx.open());
    afterEach(() => fx.close());
    return fx;
  }

  /** The subject messages are published to, the dead-letter subject, and the durable consumer's name. */
  get subject(): string {
    return `${this.stream}.work`;
  }
  get deadLetterSubject(): string {
    return `${this.stream}.dead`;
  }
  readonly durable = 'charger';

  /**
   * Connects and creates the streams and the consumer (`ack_wait` 2 s; a test changes it with
   * `jsm.consumers.update`); the work stream forgets a `Nats-Msg-Id` after 100 ms.
   */
  async open(): Promise<this> {
    this.stream = uniqueName('work');
    this.prefix = uniqueName('idem');
    this.effectsKey = uniqueName('effects');
    this.consumers.length = 0;
    this.nc = await connect({ servers: this.natsUrl });
    this.js = jetstream(this.nc);
    this.jsm = await jetstreamManager(this.nc);
    this.redis = new Redis(this.redisUrl);
    await this.jsm.streams.add({ name: this.stream, subjects: [this.subject], duplicate_window: 100e6 });
    await this.jsm.streams.add({ name: `${this.stream}_dead`, subjects: [this.deadLetterSubject] });
    await this.jsm.consumers.add(this.stream, {
      durable_name: this.durable,
      ack_policy: AckPolicy.Explicit,
      ack_wait: 2e9,
    });
    return this;
  }

  /** An idempotency runner on a store in the fixture's Redis (or `store`), lease 1 s by default. */
  idempotency(options: IdempotencyOptions = {}, store?: IdempotencyStore): Idempotency {
    if (!store) {
      const own = new RedisIdempotencyStore({ redis: this.redis }, { keyPrefix: this.prefix });
      this.#stores.push(own);
      store = own;
    }
    return new Idempotency({ store }, { leaseMs: 1000, ...options });
  }

  /** Creates, records and starts a consumer with {@link FAST} settings. */
  async consumer<T>(
    idempotency: Idempotency,
    options: Partial<NatsIdempotencyOptions>,
    handler: NatsHandler<T>,
  ): Promise<{ consumer: NatsIdempotentConsumer<T>; events: EventLog }> {
    const consumer = new NatsIdempotentConsumer<T>(
      { idempotency, jetstream: this.js, logger: false },
      {
        ...FAST,
        stream: this.stream,
        consumer: this.durable,
        deadLetterSubject: this.deadLetterSubject,
        ...options,
      },
      handler,
    );
    this.consumers.push(consumer as NatsIdempotentConsumer<unknown>);
    const events = recordEvents(consumer as NatsIdempotentConsumer<unknown>);
    await consumer.start();
    return { consumer, events };
  }

  /**
   * Publishes `body` with `Nats-Msg-Id: key` (none when `undefined`) and the `extra` headers, and waits for
   * the stream's ack; a repeat of a key is published again until the stream no longer drops it as a
   * duplicate (it forgets an id on a timer, some time after its 100 ms window).
   */
  async publish(
    key: string | undefined,
    body: unknown = { amount: 100 },
    extra: Record<string, string> = {},
  ): Promise<void> {
    const h = headers();
    if (key !== undefined) h.set('Nats-Msg-Id', key);
    for (const [name, value] of Object.entries(extra)) h.set(name, value);
    while ((await this.js.publish(this.subject, JSON.stringify(body), { headers: h })).duplicate) {
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }

  /** Waits until `count` dead letters are in the dead-letter stream, then returns them all. */
  async deadLetters(count: number, timeoutMs = 10_000): Promise<JsMsg[]> {
    const name = `${this.stream}_dead`;
    await waitFor(
      `${count} dead letters`,
      async () => (await this.jsm.streams.info(name)).state.messages >= count,
      timeoutMs,
    );
    const letters: JsMsg[] = [];
    const reader = await this.js.consumers.get(name);
    for await (const m of await reader.fetch({ max_messages: count, expires: 2000 })) {
      letters.push(m);
      if (letters.length === count) break;
    }
    return letters;
  }

  /** The durable consumer's counts: messages not delivered yet, and delivered but not acked. */
  async pending(): Promise<{ pending: number; ackPending: number }> {
    const info = await this.jsm.consumers.info(this.stream, this.durable);
    return { pending: info.num_pending, ackPending: info.num_ack_pending };
  }

  /** Counts one side effect of `key` in {@link NatsFixture.effectsKey} (HINCRBY). */
  async effect(key: string): Promise<void> {
    await this.redis.hincrby(this.effectsKey, key, 1);
  }

  /** Side effects per key, as numbers. */
  async effects(): Promise<Record<string, number>> {
    const raw = await this.redis.hgetall(this.effectsKey);
    return Object.fromEntries(Object.entries(raw).map(([k, v]) => [k, Number(v)]));
  }

  async close(): Promise<void> {
    await Promise.allSettled(this.consumers.map((c) => c.stop()));
    for (const name of [this.stream, `${this.stream}_dead`])
      await this.jsm.streams.delete(name).catch(() => {});
    const keys = await this.redis.keys(`${this.prefix}:*`);
    if (keys.length > 0) await this.redis.del(...keys);
    await this.redis.del(this.effectsKey);
    await this.nc.close();
    for (const store of this.#stores.splice(0)) store.close();
    this.redis.disconnect();
  }
}
