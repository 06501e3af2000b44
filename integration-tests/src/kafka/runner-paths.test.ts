import {
  buildRecordKey,
  Idempotency,
  type IdempotencyLogger,
  type RecordId,
  RedisIdempotencyStore,
  StoreUnavailableError,
  UnexpectedReplyError,
} from '@idempotent-consumer/core';
import { idempotentEachMessage } from '@idempotent-consumer/kafka';
import Redis from 'ioredis';
import { uniqueName } from '../../support/kafka-fixture';
import { freePort, waitFor } from '../../support/net';
import { describeWithServices } from '../../support/service';
import { TelemetrySdk } from '../../support/telemetry';
import { useKafkaSuite } from './kafka-suite';
import { type RecordedEvent, recordEvents } from './recorded-events';

/** A logger that keeps what it was given. */
function recordingLogger(): IdempotencyLogger & { lines: string[] } {
  const lines: string[] = [];
  return { lines, warn: (message) => lines.push(message), error: (message) => lines.push(message) };
}

describeWithServices(
  ['redis', 'kafka'],
  'kafka: every outcome goes through the runner',
  ({ redis: redisUrl, kafka: brokers }) => {
    jest.setTimeout(60_000);
    const suite = useKafkaSuite(brokers, redisUrl, {});
    /** The stores a test made on the suite's client: their conflict-wait subscribers close with them. */
    const stores: RedisIdempotencyStore[] = [];
    afterEach(() => {
      for (const store of stores.splice(0)) store.close();
    });

    it("fail-open (storeFailureMode 'open', Redis not answering): the runner's failOpen event, an UNPROTECTED run timed as handler time, no store duration", async () => {
      const sdk = new TelemetrySdk();
      const closed = new Redis(`redis://127.0.0.1:${await freePort()}`, { maxRetriesPerRequest: 0 });
      try {
        const store = new RedisIdempotencyStore({ redis: closed }, { commandTimeoutMs: 300 });
        const idempotency = new Idempotency({ store, logger: false }, { storeFailureMode: 'open' });
        const failOpen: unknown[] = [];
        idempotency.on('failOpen', (e) => failOpen.push(e.key));
        const topic = uniqueName('open');
        const groupId = uniqueName('g');
        const seen: unknown[] = [];
        const events: RecordedEvent[] = [];
        await suite.producer.send({
          topic,
          messages: [{ partition: 0, value: 'a', headers: { 'idempotency-key': 'open-1' } }],
        });
        await suite.start(groupId, topic, (c) => ({
          eachMessage: recordEvents(
            idempotentEachMessage(
              { idempotency, consumer: c, producer: suite.producer, logger: false },
              {
                groupId,
                telemetry: { tracerProvider: sdk.tracerProvider, meterProvider: sdk.meterProvider },
              },
              ({ key, outcome, attempt }) => {
                seen.push({ key, outcome, attempt });
              },
            ),
            events,
          ),
        }));
        await waitFor('the message settled', () => events.some((e) => e.type === 'settled'), 30_000);
        expect(seen).toEqual([{ key: 'open-1', outcome: 'UNPROTECTED', attempt: 1 }]);
        expect(failOpen).toEqual(['open-1']);
        expect(events.filter((e) => e.type === 'settled')).toEqual([
          expect.objectContaining({
            key: 'open-1',
            outcome: 'UNPROTECTED',
            decision: expect.objectContaining({ action: 'resolve' }),
          }),
        ]);
        const durations = await sdk.metric('idempotency.handler.duration');
        expect(durations.map((p) => (p.value as { count: number }).count)).toEqual([1]);
        expect(await sdk.metric('idempotency.store.duration')).toEqual([]);
      } finally {
        closed.disconnect();
        await sdk.close();
      }
    });

    it('a completion write that fails with an error that is not an outage stops trying: the offset stays unresolved and the message is fetched again', async () => {
      const keyPrefix = uniqueName('idem');
      let completes = 0;
      /** The runner's write finds Redis unavailable; the wrapper's next try gets a reply it cannot read. */
      class SkewedStore extends RedisIdempotencyStore {
        override async complete(
          id: RecordId,
          token: number,
          options: Parameters<RedisIdempotencyStore['complete']>[2],
        ) {
          completes++;
          if (completes === 1) throw new StoreUnavailableError('Redis did not answer (injected)');
          if (completes === 2) throw new UnexpectedReplyError('a reply this version cannot read (injected)');
          return super.complete(id, token, options);
        }
      }
      const store = new SkewedStore({ redis: suite.redis }, { keyPrefix, commandTimeoutMs: 1000 });
      stores.push(store);
      // A short lease: the re-fetched message meets the first run's claim until it lapses.
      const idempotency = new Idempotency(
        { store, logger: false },
        { leaseMs: 1000, writeAttempts: 1, retentionMs: 600_000 },
      );
      const topic = uniqueName('skew');
      const groupId = uniqueName('g');
      const runs: string[] = [];
      const events: RecordedEvent[] = [];
      const logger = recordingLogger();
      await suite.producer.send({
        topic,
        messages: [{ partition: 0, value: 'a', headers: { 'idempotency-key': 'skew-1' } }],
      });
      await suite.start(groupId, topic, (c) => ({
        eachMessage: recordEvents(
          idempotentEachMessage(
            { idempotency, consumer: c, producer: suite.producer, logger },
            {
              groupId,
              retryBackoff: { baseMs: 200, jitter: 'none' },
              storeProbeBackoff: { baseMs: 50, maxMs: 100 },
            },
            ({ key, outcome }) => {
              runs.push(`${key} ${outcome}`);
            },
          ),
          events,
        ),
      }));
      await waitFor('the message settled', () => events.some((e) => e.type === 'settled'), 30_000);
      expect(completes).toBe(3); // no loop on the unreadable reply: one try, then the re-fetch's own write
      expect(events).toContainEqual(
        expect.objectContaining({
          type: 'storeError',
          operation: 'complete',
          error: expect.any(UnexpectedReplyError),
        }),
      );
      expect(events).toContainEqual(
        expect.objectContaining({
          type: 'retryScheduled',
          key: 'skew-1',
          reason: 'store-error',
          paused: true,
        }),
      );
      expect(logger.lines.filter((l) => l.includes('stays unresolved'))).toHaveLength(1);
      // Not resolved past the unwritten completion: the re-fetch ran it again once the lease lapsed.
      expect(runs).toEqual(['skew-1 ACQUIRED', 'skew-1 ACQUIRED_STALE']);
      expect(await store.get({ scope: `${groupId}/${topic}`, key: 'skew-1' })).toMatchObject({
        state: 'COMPLETED',
      });
    });

    it("leaseLost with during 'heartbeat' when the record vanishes while the handler runs; the message is claimed again and runs", async () => {
      const keyPrefix = uniqueName('idem');
      const store = new RedisIdempotencyStore({ redis: suite.redis }, { keyPrefix, commandTimeoutMs: 1000 });
      stores.push(store);
      const idempotency = new Idempotency({ store, logger: false }, { leaseMs: 1000, retentionMs: 600_000 });
      const topic = uniqueName('hb');
      const groupId = uniqueName('g');
      const runs: string[] = [];
      const events: RecordedEvent[] = [];
      await suite.producer.send({
        topic,
        messages: [{ partition: 0, value: 'a', headers: { 'idempotency-key': 'hb-1' } }],
      });
      await suite.start(groupId, topic, (c) => ({
        eachMessage: recordEvents(
          idempotentEachMessage(
            { idempotency, consumer: c, producer: suite.producer, logger: false },
            { groupId },
            async ({ key = '', scope, signal }) => {
              runs.push(key);
              if (runs.length > 1) return 'done';
              // Redis loses the record (a restart without persistence): the next lease extension is refused.
              await suite.redis.del(buildRecordKey(keyPrefix, { scope, key }));
              await new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }));
              throw new Error('the claim was lost');
            },
          ),
          events,
        ),
      }));
      await waitFor('the message settled', () => events.some((e) => e.type === 'settled'), 30_000);
      expect(events.filter((e) => e.type === 'leaseLost')).toEqual([
        expect.objectContaining({
          key: 'hb-1',
          during: 'heartbeat',
          handlerCompleted: false,
          reason: 'record-vanished',
        }),
      ]);
      expect(runs).toEqual(['hb-1', 'hb-1']);
    });
  },
);
