import { Idempotency, RedisIdempotencyStore, StoreUnavailableError } from '@idempotent-consumer/core';
import { DEAD_LETTER_HEADERS } from '@idempotent-consumer/rabbitmq';
import { waitFor } from '../../support/net';
import { describeWithServices } from '../../support/service';
import { redisClock } from '../core/redis-target';
import { RabbitFixture } from './fixture';

/** The real store, whose heartbeats go unanswered (the fault injected: the handler's lease lapses). */
class UnansweredHeartbeats extends RedisIdempotencyStore {
  override async extend(): Promise<never> {
    throw new StoreUnavailableError('the heartbeat went unanswered');
  }
}

describeWithServices(['rabbitmq', 'redis'], 'rabbitmq adapter: the last attempt lapses', (urls) => {
  jest.setTimeout(30_000);
  const fx = RabbitFixture.eachTest(urls);

  it('a copy that meets the lapsed last attempt as FAILED is the only dead letter: the holder, whose fail is then refused, does not send a second one', async () => {
    const store = new UnansweredHeartbeats({ redis: fx.redis }, { keyPrefix: fx.prefix });
    const idempotency = new Idempotency({ store, logger: false }, { leaseMs: 300, maxAttempts: 1 });
    let release: () => void = () => {};
    const holderMayThrow = new Promise<void>((resolve) => {
      release = resolve;
    });
    let lost: () => void = () => {};
    const leaseLost = new Promise<void>((resolve) => {
      lost = resolve;
    });
    let runs = 0;
    const { events } = await fx.consumer(
      idempotency,
      { conflictWaitMs: 0, prefetch: 2 },
      async ({ signal }) => {
        runs += 1;
        // No heartbeat reaches Redis: the lease lapses while the handler runs.
        await new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }));
        lost();
        await holderMayThrow;
        throw new Error('the charge failed');
      },
    );
    fx.publish({ n: 1 }, { messageId: 'pay-1' });
    await leaseLost;
    const held = await store.get({ scope: fx.queue, key: 'pay-1' });
    await redisClock(fx.redis).passTime(held!.leaseExpiresAtMs!);
    // A second copy of the message (a producer retry) meets the last attempt's lapsed lease: FAILED,
    // dead-lettered and marked so.
    fx.publish({ n: 1 }, { messageId: 'pay-1' });
    await waitFor('the copy dead-lettered', () => events.deadLettered.length === 1);
    release();
    // The holder's delivery ends with a second dead letter, or (its fail refused) goes to a delay tier and
    // comes back to meet the FAILED record already dead-lettered.
    await waitFor(
      "the holder's delivery settled for good",
      () =>
        events.deadLettered.length === 2 ||
        events.settled.some(
          (e) => e.decision.action === 'ack' && e.decision.reason === 'dead-lettered-before',
        ),
    );

    const letters = await fx.deadLetters(1);
    expect(letters).toHaveLength(1);
    expect(events.leaseLost).toHaveLength(1); // the holder's fail, refused
    expect(letters[0]!.properties.headers?.[DEAD_LETTER_HEADERS.reason]).toBe('failed-record');
    expect(events.deadLettered).toHaveLength(1);
    expect(runs).toBe(1);
  });
});
