import { setTimeout as sleep } from 'node:timers/promises';
import { idempotentEachBatch, idempotentEachMessage } from '@idempotent-consumer/kafka';
import Redis from 'ioredis';
import type { Consumer } from 'kafkajs';
import { uniqueName } from '../../support/kafka-fixture';
import { waitFor } from '../../support/net';
import { RedisServer } from '../../support/redis-server';
import { describeWithServices } from '../../support/service';
import { redisRunner, useKafkaSuite } from './kafka-suite';
import { producePaymentsSlowly } from './payments';
import { type RecordedEvent, recordEvents } from './recorded-events';

describeWithServices(['kafka'], 'kafka: Redis stopped mid-run, then started', ({ kafka: brokers }) => {
  let server: RedisServer;
  beforeAll(async () => {
    // Durable (AOF, fsync always): an idempotency store must not forget completed records when it restarts.
    server = await RedisServer.start({ args: ['--appendonly', 'yes', '--appendfsync', 'always'] });
  });
  afterAll(() => server.dispose());
  const suite = useKafkaSuite(brokers);

  it.each(['eachMessage', 'eachBatch'] as const)(
    '%s pauses consumption, resumes, loses nothing and charges nothing twice',
    async (wrapper) => {
      const redis = new Redis(server.url, {
        enableAutoPipelining: true,
        enableOfflineQueue: false,
        maxRetriesPerRequest: 0,
        retryStrategy: () => 100,
      });
      await waitFor('redis ready', () => redis.status === 'ready', 5000);
      const topic = uniqueName('outage');
      const groupId = uniqueName('g');
      // Few write retries inside the runner: the adapter then keeps writing the completion itself, heartbeating.
      const idempotency = redisRunner(
        redis,
        { leaseMs: 3000, writeAttempts: 2 },
        { keyPrefix: 'idem', commandTimeoutMs: 300 },
      );
      const events: RecordedEvent[] = [];
      const trace: string[] = [];
      for (const name of ['outcome', 'completed', 'released', 'failed', 'leaseLost', 'storeError'] as const) {
        idempotency.on(name, (e: object) =>
          trace.push(
            `${Date.now() % 100000} ${name} ${JSON.stringify(e, (k, v) => (k === 'error' ? String(v) : v))}`,
          ),
        );
      }
      const charges = new Map<string, number>();
      const options = {
        groupId,
        deadLetterTopic: false as const,
        maxInlineDelayMs: 1000,
        storeProbeBackoff: { baseMs: 200, maxMs: 200 },
      };
      const handler = async ({ key = '' }: { key?: string | undefined }) => {
        await sleep(5);
        charges.set(key, (charges.get(key) ?? 0) + 1);
        trace.push(`${Date.now() % 100000} CHARGE ${key}`);
      };
      const total = 120;
      let consumer: Consumer | undefined;
      let producing: Promise<void> | undefined;
      try {
        consumer = await suite.start(groupId, topic, (c) =>
          wrapper === 'eachMessage'
            ? {
                eachMessage: recordEvents(
                  idempotentEachMessage({ idempotency, consumer: c }, options, handler),
                  events,
                ),
              }
            : {
                eachBatch: recordEvents(
                  idempotentEachBatch({ idempotency, consumer: c }, options, handler),
                  events,
                ),
              },
        );
        producing = producePaymentsSlowly(suite.producer, topic, total, 10);
        await waitFor('some payments', () => charges.size >= 20, 30_000);
        await server.stop();
        // The next claim (or a write after a handler, retried for a few seconds) meets the outage.
        await waitFor(
          'the wrapper to see the outage',
          () =>
            events.some(
              (e) => e.type === 'storeUnavailable' || (e.type === 'storeError' && e.operation === 'complete'),
            ),
          20_000,
        );
        const chargedWhilePaused = charges.size;
        await sleep(1500);
        // Fail closed: nothing runs while Redis is down.
        expect(charges.size).toBe(chargedWhilePaused);
        await server.restart();
        await producing;
        await waitFor(`all ${total} payments`, () => charges.size >= total, 45_000);
        await sleep(300);
        expect(charges.size).toBe(total);
        const twice = [...charges.entries()].filter(([, n]) => n !== 1);
        if (twice.length > 0)
          process.stderr.write(
            `${trace
              .filter(
                (t) => twice.some(([k]) => t.includes(`${k}"`) || t.endsWith(k)) || t.includes('storeError'),
              )
              .slice(0, 80)
              .join('\n')}\n${JSON.stringify(events.filter((e) => e.type !== 'settled'))}\n`,
          );
        expect(twice).toEqual([]);
      } finally {
        await server.restart();
        await producing?.catch(() => {});
        await consumer?.disconnect(); // before the store client goes (the suite disconnects it again, a no-op)
        redis.disconnect();
      }
    },
    120_000,
  );
});
