import {
  Idempotency,
  type IdempotencyOptions,
  RedisIdempotencyStore,
  type RedisIdempotencyStoreOptions,
} from '@idempotent-consumer/core';
import {
  type IdempotentEachBatch,
  type IdempotentEachMessage,
  idempotentEachMessage,
  type KafkaHandler,
} from '@idempotent-consumer/kafka';
import Redis, { type RedisOptions } from 'ioredis';
import type { Consumer, Kafka, Producer } from 'kafkajs';
import {
  type ConsumerExtra,
  connectProducer,
  kafkaClient,
  startConsumer,
  uniqueName,
} from '../../support/kafka-fixture';

/** What a test's `run` gives a consumer: one idempotent wrapper, as `eachMessage` or as `eachBatch`. */
export type WrappedHandler = { eachMessage: IdempotentEachMessage } | { eachBatch: IdempotentEachBatch };

/** The clients a Kafka suite shares between its tests: see {@link useKafkaSuite}. */
export interface KafkaSuite {
  /** A client of the suite's Redis; throws when the suite was given no Redis URL. */
  readonly redis: Redis;
  /** A quiet KafkaJS client of the brokers ({@link kafkaClient}). */
  readonly kafka: Kafka;
  /** A connected producer ({@link connectProducer}). */
  readonly producer: Producer;
  /**
   * Starts a consumer of `groupId` on `topic` with the wrapper `run` builds ({@link startConsumer}, on
   * `kafka` if given, else the suite's client) and resolves once it joined. After the test the consumer is
   * disconnected, then its wrapper closed (the order `close()` asks for).
   */
  start(
    groupId: string,
    topic: string,
    run: (consumer: Consumer) => WrappedHandler,
    extra?: ConsumerExtra,
    kafka?: Kafka,
  ): Promise<Consumer>;
}

/**
 * Registers the hooks of a Kafka suite: before all its tests a Redis client on `redisUrl` (when given, with
 * `redisOptions`, by default auto-pipelining), a KafkaJS client on `brokers` and a connected producer; after
 * each test the consumers started with {@link KafkaSuite.start} are disconnected and their wrappers
 * closed; after all tests the producer and Redis client are closed. Call it in a `describe` body.
 */
export function useKafkaSuite(
  brokers: string,
  redisUrl?: string,
  redisOptions: RedisOptions = { enableAutoPipelining: true },
): KafkaSuite {
  let redis: Redis | undefined;
  let kafka: Kafka;
  let producer: Producer;
  const consumers: Consumer[] = [];
  const closers: (() => void)[] = [];
  beforeAll(async () => {
    if (redisUrl !== undefined) redis = new Redis(redisUrl, redisOptions);
    kafka = kafkaClient(brokers);
    producer = await connectProducer(kafka);
  });
  afterEach(async () => {
    await Promise.all(consumers.splice(0).map((c) => c.disconnect()));
    for (const close of closers.splice(0)) close();
  });
  afterAll(async () => {
    await producer?.disconnect();
    // A store that waited on a conflict holds a subscriber connection of its own for a second after the
    // last wait: closed here, or it keeps the Jest worker alive after the last test.
    for (const store of runnerStores.splice(0)) store.close();
    await redis?.quit();
  });
  return {
    get redis() {
      if (redis === undefined) throw new Error('useKafkaSuite was given no Redis URL');
      return redis;
    },
    get kafka() {
      return kafka;
    },
    get producer() {
      return producer;
    },
    async start(groupId, topic, run, extra, client = kafka) {
      const consumer = await startConsumer(
        client,
        groupId,
        topic,
        (c) => {
          const handlers = run(c);
          closers.push('eachMessage' in handlers ? handlers.eachMessage.close : handlers.eachBatch.close);
          return handlers;
        },
        extra,
      );
      consumers.push(consumer);
      return consumer;
    },
  };
}

/** The stores {@link redisRunner} made, closed after all tests of a {@link useKafkaSuite} suite. */
const runnerStores: RedisIdempotencyStore[] = [];

/**
 * A runner on a {@link RedisIdempotencyStore} of `redis` under a fresh key prefix (unless `store` names
 * one), with `options` over a retention of 10 minutes (long enough that no record of a test expires).
 */
export function redisRunner(
  redis: Redis,
  options: IdempotencyOptions,
  store: Partial<RedisIdempotencyStoreOptions> = {},
): Idempotency {
  const redisStore = new RedisIdempotencyStore({ redis }, { keyPrefix: uniqueName('idem'), ...store });
  runnerStores.push(redisStore);
  return new Idempotency({ store: redisStore }, { retentionMs: 600_000, ...options });
}

/**
 * Counts the deliveries `idempotency` settled: each completed run and each DUPLICATE (a delivery that
 * runs nothing). Returns a reader of the count.
 */
export function countSettled(idempotency: Idempotency): () => number {
  let settled = 0;
  idempotency.on('outcome', ({ outcome }) => {
    if (outcome === 'DUPLICATE') settled++;
  });
  idempotency.on('completed', () => settled++);
  return () => settled;
}

/**
 * A `run` for {@link KafkaSuite.start} or `startMember` (support/kafka-fixture.ts): `handler` wrapped by
 * {@link idempotentEachMessage} on `idempotency` for `groupId`, without a dead-letter topic (a failure
 * retries and never dead-letters), built anew for each consumer.
 */
export function eachMessageOf(
  idempotency: Idempotency,
  groupId: string,
  handler: KafkaHandler<unknown>,
): (consumer: Consumer) => { eachMessage: IdempotentEachMessage } {
  return (consumer) => ({
    eachMessage: idempotentEachMessage(
      { idempotency, consumer },
      { groupId, deadLetterTopic: false },
      handler,
    ),
  });
}
