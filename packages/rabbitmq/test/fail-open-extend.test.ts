import {
  type ClaimOptions,
  type ClaimReply,
  Idempotency,
  MemoryIdempotencyStore,
  type RecordId,
  StoreUnavailableError,
} from '@idempotent-consumer/core';
import { createIdempotentConsumer, type RabbitMqIdempotencyEvents } from '../src';
import { fakeConnection } from './fake-amqp';

/**
 * The wait for a conflicting holder ends with this caller's own claim, but with almost none of its lease
 * left (the claim was sent long ago, as after a wait that outlived most of a lease), and the store then
 * stops answering: the runner's one extension before the handler goes unanswered, and `run` rejects
 * `StoreUnavailableError` (nothing ran), whatever `storeFailureMode`.
 */
class LateClaimThenDown extends MemoryIdempotencyStore {
  /** The first claim meets a holder (CONFLICT); the wait that follows ends with the key claimed. */
  override async claim(_id: RecordId, _options: ClaimOptions): Promise<ClaimReply> {
    return { outcome: 'CONFLICT', fencingToken: 1, attempt: 1, remainingLeaseMs: 1000 };
  }
  override async waitForOutcome(id: RecordId, options: ClaimOptions): Promise<ClaimReply> {
    const reply = await super.claim(id, options);
    if (reply.outcome !== 'ACQUIRED' && reply.outcome !== 'ACQUIRED_STALE') return reply;
    return { ...reply, leaseExpiresAtMs: reply.serverTimeMs + 1 };
  }
  override async extend(): Promise<never> {
    throw new StoreUnavailableError('the store does not answer');
  }
}

describe('IdempotentConsumer under storeFailureMode open', () => {
  it('a run that rejects StoreUnavailableError before its handler does not pause consumption: the delivery is requeued later', async () => {
    const fake = fakeConnection();
    const store = new LateClaimThenDown();
    const idempotency = new Idempotency(
      { store, logger: false },
      { storeFailureMode: 'open', leaseMs: 1000, conflictWaitMs: 1000 },
    );
    const consumer = createIdempotentConsumer(
      { idempotency, connection: fake.connection, logger: false },
      { queue: 'work', delayTiersMs: [10, 50] },
      () => 'ran',
    );
    const unavailable: unknown[] = [];
    consumer.on('storeUnavailable', (e) => unavailable.push(e.error));
    await consumer.start();
    const settled = new Promise<RabbitMqIdempotencyEvents['settled'][0]>((resolve) =>
      consumer.once('settled', resolve),
    );
    fake.channel.deliver('{}', { messageId: 'k1' });

    const event = await settled;
    expect(event.decision).toMatchObject({ action: 'requeue' });
    expect(fake.channel.nacked).toEqual([{ tag: 1, requeue: true }]);
    // Failing open, a store that does not answer never stops consumption.
    expect(unavailable).toEqual([]);
    expect(consumer.state).toBe('running');
    expect(fake.channel.cancels).toBe(0);
    await consumer.stop();
  });
});
