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
  consumer.on(consumer.events.GROUP_JOIN, () => {
    joined = true;
  });
  const handlers = run(consumer);
  await consumer.run({
    autoCommitInterval: extra.autoCommitInterval ?? 200,
    partitionsConsumedConcurrently: extra.partitionsConsumedConcurrently ?? 1,
    ...('eachBatch' in handlers ? { eachBatch: handlers.eachBatch, eachBatchAutoResolve: false } : handlers),
  });
  await waitFor(`consumer of ${groupId} to join`, () => joined, 20_000);
  return consumer;
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
