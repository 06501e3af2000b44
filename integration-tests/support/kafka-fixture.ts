import { setTimeout as sleep } from 'node:timers/promises';
import {
  type Consumer,
  type EachBatchHandler,
  type EachMessageHandler,
  type IHeaders,
  Kafka,
  type KafkaMessage,
  logLevel,
  type Producer,
} from 'kafkajs';
import { waitFor } from './net';

/** A quiet KafkaJS client for the brokers found by global-setup. */
export function kafkaClient(brokers: string, clientId = 'ic-tests'): Kafka {
  return new Kafka({
    clientId,
    brokers: brokers.split(','),
    logLevel: logLevel.NOTHING,
    retry: { retries: 8 },
  });
}

/** A topic / group name no other test or run uses. */
export function uniqueName(what: string): string {
  return `ic-${what}-${process.pid}-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 6)}`;
}

/**
 * Consumer settings that keep tests fast on the mock cluster: its rebalance waits `sessionTimeout - 1000`
 * ms for members (librdkafka `rdkafka_mock_cgrp.c`), so the session is short and heartbeats frequent.
 */
export const FAST_CONSUMER = {
  sessionTimeout: 3000,
  rebalanceTimeout: 3000,
  heartbeatInterval: 300,
  maxWaitTimeInMs: 50,
  retry: { initialRetryTime: 50, retries: 30, maxRetryTime: 500 },
} as const;

/** Starts a consumer subscribed to `topic` from the beginning; resolves once it joined the group. */
export async function startConsumer(
  kafka: Kafka,
  groupId: string,
  topic: string,
  run: (consumer: Consumer) => { eachMessage: EachMessageHandler } | { eachBatch: EachBatchHandler },
  extra: { autoCommitInterval?: number; partitionsConsumedConcurrently?: number } = {},
): Promise<Consumer> {
  const consumer = kafka.consumer({ groupId, ...FAST_CONSUMER });
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  let joined = false;
  let crashed: unknown;
  consumer.on(consumer.events.GROUP_JOIN, () => {
    joined = true;
  });
  consumer.on(consumer.events.CRASH, ({ payload }) => {
    if (!joined && !payload.restart) crashed = payload.error;
  });
  const handlers = run(consumer);
  await consumer.run({
    autoCommitInterval: extra.autoCommitInterval ?? 200,
    partitionsConsumedConcurrently: extra.partitionsConsumedConcurrently ?? 1,
    ...('eachBatch' in handlers ? { eachBatch: handlers.eachBatch, eachBatchAutoResolve: false } : handlers),
  });
  try {
    await waitFor(
      `consumer of ${groupId} to join`,
      () => {
        if (crashed !== undefined) {
          if ((crashed as { type?: unknown }).type === 'INVALID_REQUEST')
            throw new MockSyncGroupError(groupId, crashed);
          throw crashed;
        }
        return joined;
      },
      20_000,
    );
  } catch (error) {
    await consumer.disconnect().catch(() => {});
    throw error;
  }
  return consumer;
}

/**
 * Runs `start` (a {@link startConsumer} call) again, up to `tries` times in all, while it fails with
 * {@link MockSyncGroupError}: the mock stopped the joining consumer, so a new one joins in its place (what
 * an application's supervisor would do). Each retry is reported on stderr. Any other error is rethrown.
 */
export async function joinDespiteMock<T>(what: string, start: () => Promise<T>, tries = 3): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await start();
    } catch (error) {
      if (!(error instanceof MockSyncGroupError) || attempt >= tries) throw error;
      process.stderr.write(`[${what}] ${error.message}; joining again\n`);
    }
  }
}

/**
 * A consumer stopped for good while joining, on the mock cluster's INVALID_REQUEST answer to a late
 * SyncGroup ({@link MOCK_SYNC_GROUP_LIMIT}): an artefact of the test broker, not of the code under test.
 * A test that lets members join may start the member again (a new consumer) when it sees this.
 */
export class MockSyncGroupError extends Error {
  constructor(groupId: string, cause: unknown) {
    super(`${MOCK_SYNC_GROUP_LIMIT} (group ${groupId}): the joining consumer stopped`, { cause });
  }
}

/**
 * A limit of the kcat mock cluster (librdkafka 2.0.2, `rdkafka_mock_cgrp.c`), not of Kafka: its group
 * coordinator answers a SyncGroup with INVALID_REQUEST when the group is no longer in its Syncing state
 * (already Up, or Empty) with the same generation; that happens to a member whose SyncGroup comes late,
 * after the others synced, which a busy member does when it joins or rejoins a running group: seen with a
 * consumer from another process joining (with plain KafkaJS too), and with a consumer of the same process
 * joining a group whose members are busy in their handlers (kafka/interruptions.test.ts, about one join in
 * ten on a loaded machine). KafkaJS treats INVALID_REQUEST as fatal: the consumer crashes (`CRASH`,
 * `restart: false`) and stops consuming, with no error for its caller. {@link startConsumer} turns a crash
 * before the join into a {@link MockSyncGroupError} instead of a 20 s timeout. A test that lets a member join therefore watches the group
 * ({@link watchGroup}) and asserts that every member joined the new generation and none crashed, so it
 * cannot pass by accident on a member that silently stopped.
 */
export const MOCK_SYNC_GROUP_LIMIT = 'kcat mock cluster: late SyncGroup answered INVALID_REQUEST';

/**
 * What a consumer saw of its group: how many times it joined (KafkaJS `GROUP_JOIN`, one per generation it
 * was part of) and every `CRASH`. A test that means "a member joins" or "the group rebalances" asserts
 * the joins it expects and no crash, rather than only its end state: see {@link MOCK_SYNC_GROUP_LIMIT}.
 */
export function watchGroup(consumer: Consumer): {
  joins(): number;
  crashes(): { error: string; restart: boolean }[];
} {
  let joins = 0;
  const crashes: { error: string; restart: boolean }[] = [];
  consumer.on(consumer.events.GROUP_JOIN, () => {
    joins += 1;
  });
  consumer.on(consumer.events.CRASH, ({ payload }) => {
    crashes.push({ error: `${payload.error?.name}: ${payload.error?.message}`, restart: payload.restart });
  });
  return { joins: () => joins, crashes: () => [...crashes] };
}

/** Producer that sends to the mock cluster (topics are created on first use). */
export async function connectProducer(kafka: Kafka): Promise<Producer> {
  const producer = kafka.producer({ allowAutoTopicCreation: true, retry: { retries: 8 } });
  await producer.connect();
  return producer;
}

/** Creates a topic by producing to it is not enough for a consumer; this waits for its metadata. */
export async function ensureTopic(kafka: Kafka, topic: string): Promise<void> {
  const admin = kafka.admin();
  await admin.connect();
  try {
    await waitFor(
      `metadata of ${topic}`,
      async () => {
        try {
          await admin.fetchTopicMetadata({ topics: [topic] });
          return true;
        } catch {
          return false;
        }
      },
      10_000,
      100,
    );
  } finally {
    await admin.disconnect();
  }
}

/** Reads `count` messages of `topic` from the beginning with a fresh group, within `timeoutMs`. */
export async function readTopic(
  kafka: Kafka,
  topic: string,
  count: number,
  timeoutMs = 20_000,
): Promise<KafkaMessage[]> {
  const got: KafkaMessage[] = [];
  const consumer = await startConsumer(kafka, uniqueName('reader'), topic, () => ({
    eachMessage: async ({ message }) => {
      got.push(message);
    },
  }));
  try {
    await waitFor(`${count} messages on ${topic}`, () => got.length >= count, timeoutMs);
    await sleep(200); // a message beyond `count` would show up here
    return got;
  } finally {
    await consumer.disconnect();
  }
}

/** A header as text. */
export function header(headers: IHeaders | undefined, name: string): string | undefined {
  const v = headers?.[name];
  const first = Array.isArray(v) ? v[0] : v;
  return first === undefined ? undefined : first.toString();
}
