import { RedisIdempotencyStore } from '@idempotent-consumer/core';
import { describeWithServices } from '../../support/service';
import {
  COMMAND_TIMEOUT_MS,
  HeldHandlers,
  LEASE_MS,
  StoreBlackhole,
  trafficThroughOutage,
  useBlackholedRedis,
} from '../../support/store-blackhole';
import { pause, RabbitFixture } from './fixture';

// Redis behind a network that drops packets (no reset) for 8 s while the consumer runs. Before: claims
// written into the dead connection reached Redis when it healed, long after their deliveries were requeued,
// and held their keys for a lease nobody ran (their redelivery republished to a delay tier, then ran as
// ACQUIRED_STALE, attempt 2); with every prefetch slot retrying a completion write, storeUnavailable came
// only once the runner's writeAttempts were spent (7.4 s at commandTimeoutMs 500, about 18 s by default).
describeWithServices(['rabbitmq', 'redis'], 'rabbitmq adapter: Redis blackholed mid-run', (urls) => {
  const fx = RabbitFixture.eachTest(urls);
  const redis = useBlackholedRedis();

  /** A consumer of the fixture's queue on a store reached through the proxy, reporting to `outage`. */
  const start = async (prefetch: number, handler: () => Promise<void>) => {
    const outage = new StoreBlackhole(redis.proxy, COMMAND_TIMEOUT_MS);
    const store = new RedisIdempotencyStore(
      { redis: redis.storeRedis },
      { keyPrefix: fx.prefix, commandTimeoutMs: COMMAND_TIMEOUT_MS },
    );
    const { consumer } = await fx.consumer(
      fx.idempotency({ leaseMs: LEASE_MS }, store),
      { prefetch, storeProbeBackoff: { baseMs: 100, maxMs: 200, jitter: 'none' } },
      async (context) => {
        outage.ran(context);
        await handler();
      },
    );
    consumer.on('storeUnavailable', () => outage.storeUnavailable());
    consumer.on('settled', (e) => {
      if (e.decision.action === 'requeue' && e.decision.reason === 'store-unavailable')
        outage.refusedKey(e.key);
    });
    const reader = new RedisIdempotencyStore({ redis: redis.direct }, { keyPrefix: fx.prefix });
    const recordOf = (key: string) => reader.get({ scope: fx.queue, key });
    const send = (key: string) => fx.publish({ key }, { messageId: key });
    return { outage, recordOf, send };
  };

  it('steady traffic, packets dropped for 8 s: no claim left stale or counted, refused messages run within 2 s of Redis answering', async () => {
    const { outage, recordOf, send } = await start(8, () => pause(2).then(() => undefined));
    const keys = await trafficThroughOutage(outage, send, 10);
    await outage.allRan(keys);
    await outage.expectRecovered(keys, recordOf, { refused: true });
  }, 60_000);

  it('every prefetch slot busy in a handler when packets drop: storeUnavailable within commandTimeoutMs + 1 s (was after the completion retries)', async () => {
    const held = new HeldHandlers();
    const { outage, recordOf, send } = await start(2, held.handler);
    const keys = ['busy-0', 'busy-1'];
    for (const key of keys) send(key);
    await held.outageWhileRunning(outage, keys);
    await outage.expectRecovered(keys, recordOf, { refused: false });
  }, 60_000);
});
