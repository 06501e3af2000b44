import { setTimeout as sleep } from 'node:timers/promises';
import { Idempotency, RedisIdempotencyStore } from '@idempotent-consumer/core';
import { IdempotentSqsPoller } from '@idempotent-consumer/sqs';
import { describeWithServices } from '../../support/service';
import { SqsFixture } from '../../support/sqs-fixture';
import { sendMessage } from '../../support/sqs-helpers';
import {
  COMMAND_TIMEOUT_MS,
  HeldHandlers,
  LEASE_MS,
  StoreBlackhole,
  trafficThroughOutage,
  useBlackholedRedis,
} from '../../support/store-blackhole';

// Redis behind a network that drops packets (no reset) for 8 s while the poller runs. Before: claims written
// into the dead connection reached Redis when it healed and held their keys for a lease nobody ran, and the
// messages the store did not answer stayed invisible until their visibility timeout lapsed (a lease), then
// ran as ACQUIRED_STALE, attempt 2; with every slot retrying a completion write, storeUnavailable came only
// once the runner's writeAttempts were spent.
describeWithServices(['redis', 'sqs'], 'sqs poller: Redis blackholed mid-run', ({ redis: redisUrl, sqs }) => {
  const fx = SqsFixture.forSuite(redisUrl, sqs);
  const pollers: IdempotentSqsPoller<void>[] = [];
  afterEach(() => Promise.all(pollers.splice(0).map((p) => p.stop())));
  const redis = useBlackholedRedis();

  /** A started poller of a new queue on a store reached through the proxy, reporting to `outage`. */
  const start = async (concurrency: number, handler: () => Promise<void>) => {
    const outage = new StoreBlackhole(redis.proxy, COMMAND_TIMEOUT_MS);
    const queue = await fx.queue('blackhole');
    const keyPrefix = `${fx.prefix}-blackhole-${Date.now()}`;
    const store = new RedisIdempotencyStore(
      { redis: redis.storeRedis },
      { keyPrefix, commandTimeoutMs: COMMAND_TIMEOUT_MS },
    );
    const poller = new IdempotentSqsPoller<void>(
      { idempotency: new Idempotency({ store }, { leaseMs: LEASE_MS }), sqs: fx.sqs, logger: false },
      {
        queueUrl: queue.url,
        waitTimeSeconds: 1,
        concurrency,
        storeProbeBackoff: { baseMs: 100, maxMs: 200 },
      },
      async (context) => {
        outage.ran(context);
        await handler();
      },
    );
    pollers.push(poller);
    poller.on('storeUnavailable', () => outage.storeUnavailable());
    poller.on('settled', (e) => {
      if (e.decision.action === 'leave' && e.decision.reason === 'store-unavailable')
        outage.refusedKey(e.key);
    });
    await poller.start();
    const reader = new RedisIdempotencyStore({ redis: redis.direct }, { keyPrefix });
    const scope = queue.url.split('/').pop()!;
    const recordOf = (key: string) => reader.get({ scope, key });
    const send = (key: string) => sendMessage(fx.sqs, queue.url, key, { key });
    return { outage, recordOf, send };
  };

  it('steady traffic, packets dropped for 8 s: no claim left stale or counted, refused messages run within 2 s of Redis answering', async () => {
    const { outage, recordOf, send } = await start(8, () => sleep(2));
    // About 10 messages a second: the emulator hands a message made visible again out after those that
    // waited meanwhile, so the backlog of the outage (80 messages) runs first, well within the 2 s.
    const keys = await trafficThroughOutage(outage, send, 100);
    await outage.allRan(keys, 60_000);
    await outage.expectRecovered(keys, recordOf, { refused: true });
  }, 120_000);

  it('every slot busy in a handler when packets drop: storeUnavailable within commandTimeoutMs + 1 s (was after the completion retries)', async () => {
    const held = new HeldHandlers();
    const { outage, recordOf, send } = await start(2, held.handler);
    const keys = ['busy-0', 'busy-1'];
    for (const key of keys) await send(key);
    await held.outageWhileRunning(outage, keys);
    await outage.expectRecovered(keys, recordOf, { refused: false });
  }, 120_000);
});
