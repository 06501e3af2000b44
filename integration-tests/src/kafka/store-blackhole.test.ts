import { setTimeout as sleep } from 'node:timers/promises';
import { RedisIdempotencyStore } from '@idempotent-consumer/core';
import { idempotentEachMessage } from '@idempotent-consumer/kafka';
import { ensureTopic, uniqueName } from '../../support/kafka-fixture';
import { describeWithServices } from '../../support/service';
import {
  COMMAND_TIMEOUT_MS,
  HeldHandlers,
  LEASE_MS,
  StoreBlackhole,
  trafficThroughOutage,
  useBlackholedRedis,
} from '../../support/store-blackhole';
import { redisRunner, useKafkaSuite } from './kafka-suite';

// Redis behind a network that drops packets (no reset) for 8 s while the consumer runs. Before: claims
// written into the dead connection reached Redis when it healed and held their keys for a lease nobody ran
// (the re-fetched message met CONFLICT, the partition paused, then it ran as ACQUIRED_STALE, attempt 2);
// with every partition retrying a completion write, storeUnavailable came only once the runner's
// writeAttempts were spent.
describeWithServices(['kafka', 'redis'], 'kafka: Redis blackholed mid-run', ({ kafka: brokers }) => {
  const suite = useKafkaSuite(brokers);
  const redis = useBlackholedRedis();

  /**
   * `idempotentEachMessage` on a new topic (the mock's four partitions, consumed concurrently) and a store
   * reached through the proxy, reporting to `outage`. Its messages carry their key in a header; `send` puts
   * each on the next of partitions 0 to 2, and on partition 3 while packets are dropped: a partition with a
   * message in progress holds it until its write is answered, so the one kept idle until then is where a
   * claim meets the outage.
   */
  const start = async (handler: () => Promise<void>) => {
    const outage = new StoreBlackhole(redis.proxy, COMMAND_TIMEOUT_MS);
    const topic = uniqueName('blackhole');
    const groupId = uniqueName('g');
    const keyPrefix = uniqueName('idem');
    const idempotency = redisRunner(
      redis.storeRedis,
      { leaseMs: LEASE_MS },
      { keyPrefix, commandTimeoutMs: COMMAND_TIMEOUT_MS },
    );
    // A claim the store did not answer: its message waits for the store (inline, then paused).
    idempotency.on('storeError', (e) => {
      if (e.operation === 'claim') outage.refusedKey(e.subject?.key);
    });
    await suite.producer.send({ topic, messages: [{ value: 'first', partition: 0 }] });
    await ensureTopic(suite.kafka, topic);
    await suite.start(
      groupId,
      topic,
      (consumer) => {
        const eachMessage = idempotentEachMessage(
          { idempotency, consumer },
          {
            groupId,
            deadLetterTopic: false,
            missingKey: 'process',
            storeProbeBackoff: { baseMs: 100, maxMs: 200 },
          },
          async (context) => {
            outage.ran(context);
            await handler();
          },
        );
        eachMessage.events.on('storeUnavailable', () => outage.storeUnavailable());
        return { eachMessage };
      },
      { partitionsConsumedConcurrently: 4 },
    );
    const reader = new RedisIdempotencyStore({ redis: redis.direct }, { keyPrefix });
    const recordOf = (key: string) => reader.get({ scope: `${groupId}/${topic}`, key });
    let sent = 0;
    const send = (key: string) =>
      suite.producer.send({
        topic,
        messages: [
          { value: key, partition: outage.dropping ? 3 : ++sent % 3, headers: { 'idempotency-key': key } },
        ],
      });
    return { outage, recordOf, send };
  };

  it('steady traffic, packets dropped for 8 s: no claim left stale or counted, refused messages run within 2 s of Redis answering', async () => {
    const { outage, recordOf, send } = await start(() => sleep(2));
    const keys = await trafficThroughOutage(outage, send, 10);
    await outage.allRan(keys, 60_000);
    await outage.expectRecovered(keys, recordOf, { refused: true });
  }, 120_000);

  it('every partition busy in a handler when packets drop: storeUnavailable within commandTimeoutMs + 1 s (was after the completion retries)', async () => {
    const held = new HeldHandlers();
    const { outage, recordOf, send } = await start(held.handler);
    const keys = ['busy-1', 'busy-2']; // on partitions 1 and 2
    for (const key of keys) await send(key);
    await held.outageWhileRunning(outage, keys);
    await outage.expectRecovered(keys, recordOf, { refused: false });
  }, 120_000);
});
