import { RedisIdempotencyStore } from '@idempotent-consumer/core';
import { waitFor } from '../../support/net';
import { useFailFastRedis } from '../../support/redis-server';
import { describeWithServices } from '../../support/service';
import { acks, RabbitFixture } from './fixture';

describeWithServices(['rabbitmq', 'redis'], 'rabbitmq adapter: a completion Redis did not take', (urls) => {
  const fx = RabbitFixture.eachTest(urls);
  // Every write on disk before it is answered: the claim survives the kill below, as on a durable Redis.
  const privateRedis = useFailFastRedis(['--appendonly', 'yes', '--appendfsync', 'always']);

  it("Redis is killed as the handler returns: the delivery is acked once, the consumer pauses; once Redis is back the record is COMPLETED (the runner's completed event carrying the handler's run time, as its unrecorded one did), and a second send of the key is a DUPLICATE (the handler ran once)", async () => {
    const { server, redis: storeRedis } = privateRedis;
    const store = new RedisIdempotencyStore(
      { redis: storeRedis },
      { keyPrefix: fx.prefix, commandTimeoutMs: 300 },
    );
    // A lease far longer than the outage: before, the record stayed IN_PROGRESS until it lapsed.
    const idempotency = fx.idempotency({ leaseMs: 30_000, writeAttempts: 1 }, store);
    const completed: { recorded: boolean; durationMs: number }[] = [];
    idempotency.on('completed', ({ recorded, durationMs }) => completed.push({ recorded, durationMs }));
    let runs = 0;
    const { consumer, events } = await fx.consumer(idempotency, {}, async ({ key }) => {
      runs += 1;
      await fx.effect(key!);
      await server.stop();
      return 'done';
    });
    const id = { scope: fx.queue, key: 'late-1' };
    fx.publish({ amount: 1 }, { messageId: id.key });
    await waitFor('the ack', () => acks(events).length === 1);
    const stateAfterAck = consumer.state;

    await server.restart();
    await waitFor('the store client to reconnect', () => storeRedis.status === 'ready', 10_000);
    let record = await store.get(id);
    for (const deadline = Date.now() + 3_000; record?.state !== 'COMPLETED' && Date.now() < deadline; ) {
      await new Promise((r) => setTimeout(r, 20));
      record = await store.get(id);
    }
    expect(record).toMatchObject({ state: 'COMPLETED', attempt: 1 });
    // The late write's event reports the handler's run time (here at least the stop of Redis), not 0.
    await waitFor('the late completed event', () => completed.length === 2);
    expect(completed).toEqual([
      { recorded: false, durationMs: expect.any(Number) },
      { recorded: true, durationMs: completed[0]!.durationMs },
    ]);
    expect(completed[0]!.durationMs).toBeGreaterThan(0);
    // Failing closed, the consumer paused for the outage, as for a claim Redis does not answer.
    expect(stateAfterAck).toBe('paused');
    expect(events.storeUnavailable).toHaveLength(1);
    await waitFor('the consumer to resume', () => events.storeRecovered.length === 1, 10_000);

    fx.publish({ amount: 1 }, { messageId: id.key });
    await waitFor('the second ack', () => acks(events).length === 2, 10_000);
    expect(acks(events).map((e) => e.outcome)).toEqual(['ACQUIRED', 'DUPLICATE']);
    expect(runs).toBe(1);
    expect(await fx.effects()).toEqual({ [id.key]: '1' });
    await consumer.stop();
    expect(await fx.depth()).toBe(0);
  }, 30_000);
});
