import {
  buildRecordKey,
  Idempotency,
  type RecordId,
  RedisIdempotencyStore,
  StoreUnavailableError,
} from '@idempotent-consumer/core';
import {
  idempotentEachBatch,
  idempotentEachMessage,
  type KafkaEventEmitter,
} from '@idempotent-consumer/kafka';
import Redis from 'ioredis';
import type { Consumer, Kafka, Producer } from 'kafkajs';
import { recordingLogger, withClosedRedis } from '../../support/closed-redis';
import {
  connectProducer,
  type GroupMember,
  kafkaClient,
  startConsumer,
  startMember,
  uniqueName,
} from '../../support/kafka-fixture';
import { waitFor } from '../../support/net';
import { describeWithServices } from '../../support/service';
import { type RecordedEvent, recordEvents } from './recorded-events';

describeWithServices(['redis', 'kafka'], 'kafka: failure paths', ({ redis: redisUrl, kafka: brokers }) => {
  jest.setTimeout(60_000);
  let redis: Redis;
  let kafka: Kafka;
  let producer: Producer;
  const consumers: Consumer[] = [];
  const closers: (() => void)[] = [];

  beforeAll(async () => {
    redis = new Redis(redisUrl);
    kafka = kafkaClient(brokers);
    producer = await connectProducer(kafka);
  });
  afterEach(async () => {
    for (const close of closers.splice(0)) close();
    await Promise.all(consumers.splice(0).map((c) => c.disconnect()));
  });
  afterAll(async () => {
    await producer.disconnect();
    await redis.quit();
  });

  it('a Redis URL pointing at a closed port: checkStore() fails promptly naming the host, the first message logs it once, and the console is not flooded', async () => {
    await withClosedRedis(async ({ redis: closed, port, printed }) => {
      const logger = recordingLogger();
      const store = new RedisIdempotencyStore({ redis: closed }, { commandTimeoutMs: 500 });
      const idempotency = new Idempotency({ store, logger: false });
      const topic = uniqueName('closed');
      const groupId = uniqueName('g');
      let eachMessage: ReturnType<typeof idempotentEachMessage> | undefined;
      const consumer = await startConsumer(kafka, groupId, topic, (c) => {
        eachMessage = idempotentEachMessage(
          { idempotency, consumer: c, producer, logger },
          { groupId, maxInlineDelayMs: 300, deadLetterTopic: false },
          () => {},
        );
        return { eachMessage };
      });
      consumers.push(consumer);
      closers.push(() => eachMessage!.close());
      const started = performance.now();
      const error = await eachMessage!.checkStore().catch((e: unknown) => e);
      expect(error).toBeInstanceOf(StoreUnavailableError);
      expect((error as Error).message).toContain(`127.0.0.1:${port}`);
      expect(performance.now() - started).toBeLessThan(10_000);
      await producer.send({ topic, messages: [{ value: 'v', headers: { 'idempotency-key': 'k' } }] });
      await waitFor(
        'the first-use error',
        () => logger.lines.some((l) => l.includes('cannot start')),
        20_000,
      );
      await waitFor(
        'the outage warning',
        () => logger.lines.some((l) => l.includes('the idempotency store is unavailable')),
        20_000,
      );
      expect(logger.lines.filter((l) => l.includes('the idempotency store is unavailable'))).toHaveLength(1);
      expect(logger.lines.filter((l) => l.includes('cannot start'))).toHaveLength(1);
      // The Redis client's error is detail at debug; the outage's one warning is the runner's.
      expect(logger.lines.filter((l) => l.includes('Redis client'))).toEqual([
        expect.stringMatching(/^debug /),
      ]);
      expect(printed.filter((line) => line.includes('[ioredis]'))).toEqual([]);
    });
  });

  it('eachMessage: a completion write refused with LEASE_LOST after an outage emits leaseLost (during write) and resolves without a rerun', async () => {
    const keyPrefix = uniqueName('idem');
    let failed = false;
    /** Redis loses the record and the runner's COMPLETED write finds Redis unavailable, once. */
    class LosingStore extends RedisIdempotencyStore {
      override async complete(
        id: RecordId,
        token: number,
        options: Parameters<RedisIdempotencyStore['complete']>[2],
      ) {
        if (!failed) {
          failed = true;
          await redis.del(buildRecordKey(keyPrefix, id));
          throw new StoreUnavailableError('Redis did not answer (injected)');
        }
        return super.complete(id, token, options);
      }
    }
    const store = new LosingStore({ redis }, { keyPrefix, commandTimeoutMs: 1000 });
    const idempotency = new Idempotency({ store, logger: false }, { leaseMs: 5000, writeAttempts: 1 });
    const topic = uniqueName('lost-write');
    const groupId = uniqueName('g');
    const runs: string[] = [];
    const events: RecordedEvent[] = [];
    const logger = recordingLogger();
    await producer.send({
      topic,
      messages: [
        { partition: 0, value: 'a', headers: { 'idempotency-key': 'lost' } },
        { partition: 0, value: 'b', headers: { 'idempotency-key': 'after' } },
      ],
    });
    const consumer = await startConsumer(kafka, groupId, topic, (c) => {
      const eachMessage = recordEvents(
        idempotentEachMessage(
          { idempotency, consumer: c, producer, logger },
          { groupId, deadLetterTopic: false, storeProbeBackoff: { baseMs: 50, maxMs: 100 } },
          ({ key }) => {
            runs.push(key!);
          },
        ),
        events,
      );
      closers.push(() => eachMessage.close());
      return { eachMessage };
    });
    consumers.push(consumer);
    await waitFor('both settled', () => events.filter((e) => e.type === 'settled').length === 2, 20_000);
    const lost = events.filter((e) => e.type === 'leaseLost');
    expect(lost).toEqual([
      expect.objectContaining({
        key: 'lost',
        during: 'write',
        handlerCompleted: true,
        reason: 'record-vanished',
      }),
    ]);
    expect(runs).toEqual(['lost', 'after']);
    expect(logger.lines.filter((l) => l.includes('lease lost'))).toHaveLength(1);
  });
  it('eachMessage: a rebalance while a completion write waits for Redis passes the rebalance error to KafkaJS, not a storeError and a pause; the write lands once Redis answers again, within the lease (the next owner meets a DUPLICATE)', async () => {
    // The handler's claim is answered; its COMPLETED write and the store gate's pings are not, until the outage ends.
    const store = new OutageStore(redis, 'complete');
    const idempotency = new Idempotency({ store, logger: false }, { leaseMs: 20_000, writeAttempts: 1 });
    const topic = uniqueName('write-rebalance');
    const groupId = uniqueName('g');
    const events: RecordedEvent[] = [];
    /** What the first consumer's eachMessage threw to KafkaJS. */
    const thrown: unknown[] = [];
    let runs = 0;
    await producer.send({
      topic,
      messages: [{ partition: 0, value: 'a', headers: { 'idempotency-key': 'written-late' } }],
    });
    const consumer = await startConsumer(kafka, groupId, topic, (c) => {
      const wrapped = recordEvents(
        idempotentEachMessage(
          { idempotency, consumer: c, producer, logger: false },
          {
            groupId,
            deadLetterTopic: false,
            brokerHeartbeatIntervalMs: 100,
            storeProbeBackoff: { baseMs: 50, maxMs: 100 },
          },
          () => {
            runs += 1;
            return 'done';
          },
        ),
        events,
      );
      closers.push(() => wrapped.close());
      return {
        eachMessage: async (payload) => {
          try {
            await wrapped(payload);
          } catch (error) {
            thrown.push(error);
            throw error;
          }
        },
      };
    });
    consumers.push(consumer);
    let second: GroupMember | undefined;
    const id = { scope: `${groupId}/${topic}`, key: 'written-late' };
    try {
      await waitFor('the completion write to wait for Redis', () =>
        events.some((e) => e.type === 'storeUnavailable'),
      );
      // A second member joins: the group rebalances, and the waiting write's heartbeat is refused.
      second = await startMember(
        kafka,
        groupId,
        topic,
        () => ({ eachMessage: async () => {} }),
        {},
        {
          what: 'kafka write rebalance',
        },
      );
      await waitFor('the first eachMessage to end', () => thrown.length > 0, 20_000);
      expect(events.filter((e) => e.type === 'storeError' && e.operation === 'process')).toEqual([]);
      expect(thrown[0]).not.toMatchObject({ code: 'PARTITION_PAUSED' });
      expect(thrown[0]).toMatchObject({
        type: expect.stringMatching(/^(REBALANCE_IN_PROGRESS|ILLEGAL_GENERATION|UNKNOWN_MEMBER_ID)$/),
      });
      expect(await store.get(id)).toMatchObject({ state: 'IN_PROGRESS' });
      // Redis answers again, well within the claim's 20 s lease: the completion this process holds lands
      // (given up on, the record stayed IN_PROGRESS and the re-fetch ran the handler again once it lapsed).
      store.down = false;
      await waitFor(
        'the record to be COMPLETED',
        async () => (await store.get(id))?.state === 'COMPLETED',
        5_000,
      );
      expect(runs).toBe(1);
    } finally {
      store.down = false;
      await second?.stop();
      store.close();
    }
  });
  /**
   * Produces one message with `key` and consumes it with `form` through `idempotency`, whose store
   * (`OutageStore`) is down until the wrapper reports the outage (`storeUnavailable`); resolves with the
   * wrapper's events once the message settled.
   */
  async function settleThroughOutage<T>(
    form: 'eachMessage' | 'eachBatch',
    idempotency: Idempotency,
    store: OutageStore,
    names: { topic: string; groupId: string; key: string },
    handler: Parameters<typeof idempotentEachMessage<T>>[2],
  ): Promise<RecordedEvent[]> {
    const { topic, groupId, key } = names;
    const events: RecordedEvent[] = [];
    await producer.send({
      topic,
      messages: [{ partition: 0, value: 'a', headers: { 'idempotency-key': key } }],
    });
    const options = {
      groupId,
      deadLetterTopic: false,
      storeProbeBackoff: { baseMs: 50, maxMs: 100 },
    } as const;
    const consumer = await startConsumer(kafka, groupId, topic, (c) => {
      const deps = { idempotency, consumer: c, producer, logger: false as const };
      /** Records the wrapper's events, ends the outage once it reports it, closes it after the test. */
      const watched = <W extends { readonly events: KafkaEventEmitter; close(): void }>(wrapper: W): W => {
        recordEvents(wrapper, events).events.once('storeUnavailable', () => {
          store.down = false;
        });
        closers.push(() => wrapper.close());
        return wrapper;
      };
      return form === 'eachMessage'
        ? { eachMessage: watched(idempotentEachMessage(deps, options, handler)) }
        : { eachBatch: watched(idempotentEachBatch(deps, options, handler)) };
    });
    consumers.push(consumer);
    await waitFor('the message settled', () => events.some((e) => e.type === 'settled'), 20_000);
    return events;
  }

  it.each(['eachMessage', 'eachBatch'] as const)(
    "%s: a completion write Redis did not take is written once a ping answers, then the offset resolves; the runner's completed event for it carries the handler's run time, as its unrecorded one did",
    async (form) => {
      // The handler's claim is answered; its COMPLETED write and the store gate's pings are not, until the
      // wrapper reports the outage.
      const store = new OutageStore(redis, 'complete');
      const idempotency = new Idempotency({ store, logger: false }, { leaseMs: 20_000, writeAttempts: 1 });
      const completed: { recorded: boolean; durationMs: number }[] = [];
      idempotency.on('completed', ({ recorded, durationMs }) => completed.push({ recorded, durationMs }));
      const topic = uniqueName('write-late-duration');
      const groupId = uniqueName('g');
      const handler = async () => {
        await new Promise((r) => setTimeout(r, 20)); // the handler's own work
        return 'done';
      };
      try {
        await settleThroughOutage(form, idempotency, store, { topic, groupId, key: 'timed' }, handler);
        expect(completed).toEqual([
          { recorded: false, durationMs: expect.any(Number) },
          { recorded: true, durationMs: completed[0]!.durationMs },
        ]);
        expect(completed[0]!.durationMs).toBeGreaterThan(0);
        expect(await store.get({ scope: `${groupId}/${topic}`, key: 'timed' })).toMatchObject({
          state: 'COMPLETED',
        });
      } finally {
        store.down = false;
        store.close();
      }
    },
  );
  it.each(['eachMessage', 'eachBatch'] as const)(
    "%s: a claim the heartbeat saw lost while the handler ran, whose completion Redis then did not take and refused once it answered: leaseLost says 'heartbeat', as the runner's first leaseLost did",
    async (form) => {
      // The claim and the extensions are answered; the COMPLETED write and the gate's pings are not, until
      // the wrapper reports the outage. A short lease: the heartbeat comes while the handler waits.
      const store = new OutageStore(redis, 'complete');
      const idempotency = new Idempotency({ store, logger: false }, { leaseMs: 1_000, writeAttempts: 1 });
      const runnerLost: string[] = [];
      idempotency.on('leaseLost', ({ during }) => runnerLost.push(during));
      const handler = async ({
        scope,
        key = '',
        signal,
      }: {
        scope: string;
        key?: string;
        signal: AbortSignal;
      }) => {
        // Redis loses the record while the handler runs: the next extension is refused, the signal aborts.
        await redis.del(buildRecordKey(store.prefix, { scope, key }));
        await new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }));
        return 'done';
      };
      try {
        const names = { topic: uniqueName('lost-then-late'), groupId: uniqueName('g'), key: 'vanishes' };
        const events = await settleThroughOutage(form, idempotency, store, names, handler);
        // The runner: lost at the heartbeat, then the late write refused.
        expect(runnerLost).toEqual(['heartbeat', 'write']);
        expect(events.filter((e) => e.type === 'leaseLost')).toEqual([
          expect.objectContaining({ during: 'heartbeat', handlerCompleted: true, reason: 'record-vanished' }),
        ]);
      } finally {
        store.down = false;
        store.close();
      }
    },
  );
  it("eachBatch: a reservation's start that Redis does not answer runs no handler, closes the store gate and pauses the topic until a ping answers; the message is fetched again and runs once", async () => {
    // The batch's claimMany is answered; the start of a reservation and the gate's pings are not, until the outage ends.
    const store = new OutageStore(redis, 'start');
    const idempotency = new Idempotency({ store, logger: false }, { leaseMs: 20_000 });
    const topic = uniqueName('start-outage');
    const groupId = uniqueName('g');
    const events: RecordedEvent[] = [];
    const runs: string[] = [];
    /** The wrapper's pause and resume calls, in order. */
    const calls: { method: 'pause' | 'resume'; topics: { topic: string; partitions?: number[] }[] }[] = [];
    await producer.send({
      topic,
      messages: ['a', 'b', 'c'].map((k) => ({ partition: 0, value: k, headers: { 'idempotency-key': k } })),
    });
    const consumer = await startConsumer(kafka, groupId, topic, (c) => {
      const recording = {
        pause: (topics: { topic: string; partitions?: number[] }[]) => {
          calls.push({ method: 'pause', topics });
          c.pause(topics);
        },
        resume: (topics: { topic: string; partitions?: number[] }[]) => {
          calls.push({ method: 'resume', topics });
          c.resume(topics);
        },
      };
      const eachBatch = recordEvents(
        idempotentEachBatch(
          { idempotency, consumer: recording, producer, logger: false },
          {
            groupId,
            deadLetterTopic: false,
            maxInlineDelayMs: 200,
            // Long enough that a one-partition backoff pause (the wrong path) cannot end within the test.
            retryBackoff: { baseMs: 60_000, jitter: 'none' },
            storeProbeBackoff: { baseMs: 50, maxMs: 100 },
          },
          ({ key, attempt }) => {
            runs.push(`${key}#${attempt}`);
          },
        ),
        events,
      );
      closers.push(() => eachBatch.close());
      return { eachBatch };
    });
    consumers.push(consumer);
    try {
      // The wrapper gives up on the first message: either by pausing (the topic, or one partition).
      await waitFor('the batch to pause', () => calls.some((c) => c.method === 'pause'), 20_000);
      expect(runs).toEqual([]);
      expect(events.filter((e) => e.type === 'storeError' && e.operation === 'process')).toEqual([]);
      expect(events.filter((e) => e.type === 'storeUnavailable')).toEqual([
        expect.objectContaining({ topic, partition: 0, error: expect.any(StoreUnavailableError) }),
      ]);
      // Fail closed: every partition of the topic, until a ping answers.
      expect(calls).toEqual([{ method: 'pause', topics: [{ topic }] }]);
      store.down = false;
      await waitFor('the store to recover', () => events.some((e) => e.type === 'storeRecovered'), 20_000);
      await waitFor(
        'the three messages to settle',
        () => events.filter((e) => e.type === 'settled').length === 3,
        20_000,
      );
      // a was fetched again (its offset never resolved) and ran once; the start that was not answered
      // counted no attempt.
      expect(runs).toEqual(['a#1', 'b#1', 'c#1']);
      expect(events.filter((e) => e.type === 'storeUnavailable')).toHaveLength(1);
      expect(calls[1]).toEqual({ method: 'resume', topics: [{ topic }] });
    } finally {
      store.down = false;
      store.close();
    }
  });
  it('eachMessage: a partition paused for a backoff while its topic waits for Redis leaves the whole topic paused', async () => {
    await withClosedRedis(async ({ redis: closed }) => {
      const store = new RedisIdempotencyStore({ redis: closed }, { commandTimeoutMs: 500 });
      const idempotency = new Idempotency({ store, logger: false });
      const topic = uniqueName('topic-pause');
      const groupId = uniqueName('g');
      let consumer: Consumer | undefined;
      /** The partitions of `topic` the consumer has paused. */
      const paused = () => consumer?.paused().find((t) => t.topic === topic)?.partitions ?? [];
      /**
       * A dead-letter producer whose broker does not answer: its send fails, once the wrapper paused the
       * topic because Redis does not answer (partition 0's message, handled at the same time).
       */
      const unreachable = {
        send: async () => {
          await waitFor('the topic paused for Redis', () => paused().includes(0), 20_000);
          throw new Error('dead-letter broker unreachable (injected)');
        },
      };
      /** What `paused()` was right after each eachMessage of partition 1 threw (it paused for a backoff). */
      const pausedAfterBackoff: number[][] = [];
      // Both messages are there before the consumer starts: one fetch, handled by two workers at once.
      await producer.send({
        topic,
        messages: [
          { partition: 0, value: 'a', headers: { 'idempotency-key': 'k0' } },
          { partition: 1, value: 'b' }, // no key: dead-lettered without the store
        ],
      });
      consumer = await startConsumer(
        kafka,
        groupId,
        topic,
        (c) => {
          const wrapped = idempotentEachMessage(
            { idempotency, consumer: c, producer: unreachable, logger: false },
            {
              groupId,
              idempotencyKey: (m) => m.headers?.['idempotency-key']?.toString(),
              maxInlineDelayMs: 200,
              retryBackoff: { baseMs: 60_000, jitter: 'none' },
            },
            () => {},
          );
          closers.push(() => wrapped.close());
          return {
            eachMessage: async (payload) => {
              try {
                await wrapped(payload);
              } catch (error) {
                if (payload.partition === 1) pausedAfterBackoff.push(paused());
                throw error;
              }
            },
          };
        },
        { partitionsConsumedConcurrently: 2 },
      );
      consumers.push(consumer);
      await waitFor('partition 1 to pause for its backoff', () => pausedAfterBackoff.length > 0, 20_000);
      // Still fail closed: partition 0 (and every other partition of the topic) stays paused until a ping
      // answers, not only partition 1.
      expect(pausedAfterBackoff[0]).toEqual(expect.arrayContaining([0, 1]));
    });
  });
});

/**
 * A store on `redis` (its own key prefix, `commandTimeoutMs` 1000) whose `unanswered` operation and pings
 * fail with `StoreUnavailableError`, as when Redis does not answer, while `down` is true; every other call
 * is answered. Set `down` to false to end the outage.
 */
class OutageStore extends RedisIdempotencyStore {
  down = true;

  constructor(
    redis: Redis,
    private readonly unanswered: 'complete' | 'start',
    /** The store's key prefix (to find a record's key). */
    readonly prefix = uniqueName('idem'),
  ) {
    super({ redis }, { keyPrefix: prefix, commandTimeoutMs: 1000 });
  }

  #refuse(operation: 'complete' | 'start' | 'ping'): void {
    if (this.down && (operation === 'ping' || operation === this.unanswered))
      throw new StoreUnavailableError(`Redis did not answer the ${operation} (injected)`);
  }

  override async complete(...args: Parameters<RedisIdempotencyStore['complete']>) {
    this.#refuse('complete');
    return super.complete(...args);
  }

  override async start(...args: Parameters<RedisIdempotencyStore['start']>) {
    this.#refuse('start');
    return super.start(...args);
  }

  override async ping() {
    this.#refuse('ping');
    return super.ping();
  }
}
