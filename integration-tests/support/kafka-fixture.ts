import { execFile } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import {
  type Consumer,
  type EachBatchHandler,
  type EachMessageHandler,
  type IHeaders,
  Kafka,
  logLevel,
  type Producer,
} from 'kafkajs';
import { hasKcat } from './kafka-mock';
import { waitFor } from './net';

const execFileAsync = promisify(execFile);

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

/** Run options of a test consumer; `joinTimeoutMs` bounds the wait for its first join (default 20 s). */
export interface ConsumerExtra {
  autoCommitInterval?: number;
  partitionsConsumedConcurrently?: number;
  joinTimeoutMs?: number;
}

/**
 * Starts a consumer subscribed to `topic` from the beginning; resolves once it joined the group. Rejects
 * with {@link MockSyncGroupError} when the mock stopped it while joining (a test whose group has other
 * members uses {@link startMember}, which starts a new consumer then).
 */
export async function startConsumer(
  kafka: Kafka,
  groupId: string,
  topic: string,
  run: (consumer: Consumer) => { eachMessage: EachMessageHandler } | { eachBatch: EachBatchHandler },
  extra: ConsumerExtra = {},
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
          if (isMockStop(crashed, false)) throw new MockSyncGroupError(groupId, crashed);
          throw crashed;
        }
        return joined;
      },
      extra.joinTimeoutMs ?? 20_000,
    );
  } catch (error) {
    await consumer.disconnect().catch(() => {});
    throw error;
  }
  return consumer;
}

/**
 * A consumer stopped for good while joining, on the mock cluster's INVALID_REQUEST answer to a late
 * SyncGroup ({@link MOCK_SYNC_GROUP_LIMIT}): an artefact of the test broker, not of the code under test.
 * {@link startMember} starts a new consumer in its place.
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
 * consumer from another process joining (with plain KafkaJS too), with a consumer of the same process
 * joining a group whose members are busy in their handlers, and with a member rejoining after another
 * joined or left (kafka/interruptions.test.ts: about one run in three over 8 rebalances on a loaded
 * machine). KafkaJS treats INVALID_REQUEST as fatal: the consumer crashes (`CRASH`, `restart: false`,
 * already disconnected) and stops consuming, with no error for its caller.
 *
 * A test that has members join or leave a running group starts them with {@link startMember}: a member
 * the mock stopped is replaced by a new consumer of the same group with the same handler (what an
 * application's supervisor does with a crashed consumer), each replacement is reported on stderr, and any
 * other crash is kept for the test to assert none happened. The test also waits for the members to join
 * the new generation ({@link GroupMember.joins}), so it cannot pass by accident on a member that silently
 * stopped.
 */
export const MOCK_SYNC_GROUP_LIMIT = 'kcat mock cluster: late SyncGroup answered INVALID_REQUEST';

/** Whether a KafkaJS `CRASH` is the mock's stop of a member ({@link MOCK_SYNC_GROUP_LIMIT}). */
function isMockStop(error: unknown, restart: boolean): boolean {
  let e = error as { type?: unknown; cause?: unknown } | undefined;
  while (e?.cause !== undefined) e = e.cause as typeof e;
  return !restart && e?.type === 'INVALID_REQUEST';
}

/** One member of a consumer group, kept in the group across the mock's stops: see {@link startMember}. */
export interface GroupMember {
  /** The consumer that is the member now (a new one after each replacement). */
  readonly consumer: Consumer;
  /** Generations the member joined (KafkaJS `GROUP_JOIN`), over all its consumers. */
  joins(): number;
  /** How many times the mock stopped the member and a new consumer took its place. */
  replacements(): number;
  /** Every crash that is not the mock's stop, and a replacement that failed: a test asserts none. */
  crashes(): { error: string; restart: boolean }[];
  /** Leaves the group (disconnects the current consumer); no replacement after this. */
  stop(): Promise<void>;
}

/**
 * Starts a member of `groupId` on `topic` (a {@link startConsumer} whose `run` builds the handler for each
 * consumer) and resolves once it joined. Whenever the mock cluster stops it ({@link MOCK_SYNC_GROUP_LIMIT}),
 * while joining or later when it rejoins after a rebalance, a new consumer with a new handler from `run`
 * takes its place, at most `maxReplacements` times in all (beyond that the stop counts as a crash).
 * `what` names the test on the stderr line that reports each replacement.
 */
export async function startMember(
  kafka: Kafka,
  groupId: string,
  topic: string,
  run: (consumer: Consumer) => { eachMessage: EachMessageHandler } | { eachBatch: EachBatchHandler },
  extra: ConsumerExtra = {},
  { what = groupId, maxReplacements = 5 }: { what?: string; maxReplacements?: number } = {},
): Promise<GroupMember> {
  let joins = 0;
  let replacements = 0;
  let stopped = false;
  const crashes: { error: string; restart: boolean }[] = [];
  let replacing: Promise<void> = Promise.resolve();
  let current: Consumer | undefined;
  /** Called on a mock stop; answers whether a new consumer may take the member's place. */
  const mayReplace = (error: unknown): boolean => {
    if (stopped) return false;
    const message = error instanceof Error ? error.message : String(error);
    if (replacements >= maxReplacements) {
      crashes.push({ error: `${message} (after ${replacements} replacements)`, restart: false });
      return false;
    }
    replacements += 1;
    process.stderr.write(
      `[${what}] ${MOCK_SYNC_GROUP_LIMIT} (group ${groupId}); a new consumer takes the member's place\n`,
    );
    return true;
  };
  /** One consumer of the member; resolves once it joined, or rejects if it failed otherwise. */
  const incarnate = async (): Promise<Consumer> => {
    for (;;) {
      try {
        return await startConsumer(
          kafka,
          groupId,
          topic,
          (c) => {
            const state = { joined: false };
            c.on(c.events.GROUP_JOIN, () => {
              state.joined = true;
              joins += 1;
            });
            c.on(c.events.CRASH, ({ payload }) => {
              // A crash before the join rejects startConsumer (handled below), one after it is seen here.
              if (!state.joined) return;
              if (isMockStop(payload.error, payload.restart)) {
                if (mayReplace(payload.error)) replacing = replacing.then(replace);
              } else {
                crashes.push({
                  error: `${payload.error?.name}: ${payload.error?.message}`,
                  restart: payload.restart,
                });
              }
            });
            return run(c);
          },
          extra,
        );
      } catch (error) {
        if (!(error instanceof MockSyncGroupError) || !mayReplace(error)) throw error;
      }
    }
  };
  current = await incarnate();
  async function replace(): Promise<void> {
    if (stopped) return;
    try {
      const next = await incarnate();
      current = next;
      if (stopped) await next.disconnect();
    } catch (error) {
      crashes.push({ error: `replacement failed: ${(error as Error).message}`, restart: false });
    }
  }
  return {
    get consumer() {
      return current!;
    },
    joins: () => joins,
    replacements: () => replacements,
    crashes: () => [...crashes],
    async stop() {
      stopped = true;
      await replacing;
      await current?.disconnect();
    },
  };
}

/** Producer that sends to the mock cluster (topics are created on first use). */
export async function connectProducer(kafka: Kafka): Promise<Producer> {
  const producer = kafka.producer({ allowAutoTopicCreation: true, retry: { retries: 8 } });
  await producer.connect();
  return producer;
}

/**
 * Waits until `groupId` has committed `offset` (the next offset to read, a decimal string) for partition
 * `partition` of `topic`, asking the group coordinator every 100 ms (KafkaJS commits every
 * `autoCommitInterval`, and on disconnect); rejects after `timeoutMs`.
 */
export async function waitForCommitted(
  kafka: Kafka,
  groupId: string,
  topic: string,
  partition: number,
  offset: string,
  timeoutMs = 15_000,
): Promise<void> {
  const admin = kafka.admin();
  await admin.connect();
  try {
    await waitFor(
      `offset ${offset} of ${topic}/${partition} committed by ${groupId}`,
      async () => {
        const [t] = await admin.fetchOffsets({ groupId, topics: [topic] });
        return t?.partitions.find((p) => p.partition === partition)?.offset === offset;
      },
      timeoutMs,
      100,
    );
  } finally {
    await admin.disconnect();
  }
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

/** A message {@link readTopic} read back: where it is, its key, value and headers. */
export interface ReadMessage {
  readonly partition: number;
  readonly offset: string;
  readonly key: Buffer | null;
  readonly value: Buffer | null;
  readonly headers: IHeaders;
}

/**
 * Reads `count` messages of `topic` from the beginning within `timeoutMs`, then once more 200 ms later, so
 * that a message beyond `count` shows up too. With kcat installed it reads without a consumer group
 * ({@link kcatRead}); a new group would first wait out the group coordinator's initial rebalance delay (3 s
 * on the mock cluster, as on a Kafka broker's default). Without the kcat binary, a fresh KafkaJS group
 * reads it.
 */
export async function readTopic(
  brokers: string,
  topic: string,
  count: number,
  timeoutMs = 20_000,
): Promise<ReadMessage[]> {
  if (!hasKcat()) return readTopicWithGroup(kafkaClient(brokers), topic, count, timeoutMs);
  await waitFor(
    `${count} messages on ${topic}`,
    // A kcat that fails (a topic whose leader is not elected yet) is asked again until the deadline.
    async () => (await kcatRead(brokers, topic).catch(() => [])).length >= count,
    timeoutMs,
    100,
  );
  await sleep(200); // a message beyond `count` would show up here
  return kcatRead(brokers, topic);
}

/**
 * Every message of `topic` now: `kcat -C -e` reads each partition from its first offset to its end, without
 * a consumer group, and prints each message as JSON (`-J`, headers as a flat name, value list).
 */
async function kcatRead(brokers: string, topic: string): Promise<ReadMessage[]> {
  const { stdout } = await execFileAsync(
    'kcat',
    ['-C', '-b', brokers, '-t', topic, '-o', 'beginning', '-e', '-J', '-q'],
    { timeout: 10_000, maxBuffer: 64 * 1024 * 1024 },
  );
  return stdout
    .split('\n')
    .filter(Boolean)
    .map((line) => {
      const m = JSON.parse(line) as {
        partition: number;
        offset: number;
        key: string | null;
        payload: string | null;
        headers?: (string | null)[];
      };
      const headers: IHeaders = {};
      const list = m.headers ?? [];
      for (let i = 0; i < list.length; i += 2) {
        const name = list[i]!;
        const value = Buffer.from(list[i + 1] ?? '');
        const previous = headers[name];
        headers[name] =
          previous === undefined ? value : [...(Array.isArray(previous) ? previous : [previous]), value];
      }
      return {
        partition: m.partition,
        offset: String(m.offset),
        key: m.key === null ? null : Buffer.from(m.key),
        value: m.payload === null ? null : Buffer.from(m.payload),
        headers,
      };
    });
}

/** {@link readTopic} with a fresh KafkaJS consumer group, for brokers without kcat at hand. */
async function readTopicWithGroup(
  kafka: Kafka,
  topic: string,
  count: number,
  timeoutMs: number,
): Promise<ReadMessage[]> {
  const got: ReadMessage[] = [];
  const consumer = await startConsumer(kafka, uniqueName('reader'), topic, () => ({
    eachMessage: async ({ partition, message }) => {
      got.push({
        partition,
        offset: message.offset,
        key: message.key,
        value: message.value,
        headers: message.headers ?? {},
      });
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
