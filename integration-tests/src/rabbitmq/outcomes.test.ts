import { NonRetryableError } from '@idempotent-consumer/core';
import { decodeResult } from '@idempotent-consumer/core/tools';
import {
  DEAD_LETTER_HEADERS,
  type RabbitMqHandlerContext,
  RETRY_HEADERS,
} from '@idempotent-consumer/rabbitmq';
import { waitFor } from '../../support/net';
import { describeWithServices } from '../../support/service';
import { acks, RabbitFixture } from './fixture';

/** One test per row of the RabbitMQ column of docs/design.md#outcome-to-broker-action. */
describeWithServices(['rabbitmq', 'redis'], 'rabbitmq adapter: outcome → broker action', (urls) => {
  // Per-project `testTimeout` is not applied by jest (it is a global option), so set it here.
  jest.setTimeout(20_000);
  const fx = RabbitFixture.eachTest(urls);

  it('ACQUIRED: runs the handler, records COMPLETED, then acks', async () => {
    const idempotency = fx.idempotency();
    const seen: RabbitMqHandlerContext[] = [];
    const { consumer, events } = await fx.consumer(idempotency, {}, async (ctx) => {
      seen.push(ctx);
      // COMPLETED must be written before the ack: while the handler runs, the message is unacked.
      return { charged: JSON.parse(ctx.message.content.toString()).amount };
    });
    fx.publish({ amount: 42 }, { messageId: 'pay-1' });
    await waitFor('the ack', () => acks(events).length === 1);
    expect(seen).toHaveLength(1);
    expect(seen[0]).toMatchObject({ key: 'pay-1', attempt: 1, outcome: 'ACQUIRED' });
    expect(Number.isSafeInteger(seen[0]!.fencingToken)).toBe(true);
    expect(seen[0]!.signal).toBeInstanceOf(AbortSignal);
    expect(acks(events)[0]).toMatchObject({
      decision: { reason: 'completed' },
      outcome: 'ACQUIRED',
      key: 'pay-1',
    });
    const record = await idempotency.store.get({ scope: fx.queue, key: 'pay-1' });
    expect(record?.state).toBe('COMPLETED');
    expect(decodeResult(record?.result)).toEqual({ charged: 42 });
    await consumer.stop();
    // Nothing left unacked: after the channel closed, nothing came back to the queue.
    expect(await fx.depth()).toBe(0);
  });

  it('DUPLICATE: a second delivery with the same key is acked without running', async () => {
    let runs = 0;
    const { events } = await fx.consumer(fx.idempotency(), { prefetch: 1 }, () => ++runs);
    fx.publish({ amount: 1 }, { messageId: 'dup-1' });
    fx.publish({ amount: 1 }, { messageId: 'dup-1' });
    // The header is the fallback key source.
    fx.publish({ amount: 1 }, { headers: { 'idempotency-key': 'dup-1' } });
    await waitFor('three acks', () => acks(events).length === 3);
    expect(runs).toBe(1);
    expect(acks(events).map((e) => e.decision.reason)).toEqual(['completed', 'duplicate', 'duplicate']);
    expect(events.retryScheduled).toHaveLength(0);
    expect(events.deadLettered).toHaveLength(0);
  });

  it('CONFLICT: delayed for the holder’s remaining lease (never an immediate requeue), then completes once', async () => {
    const idempotency = fx.idempotency({ leaseMs: 1000 });
    // Another worker holds the key with a 700 ms lease and then dies (never completes).
    const holder = await idempotency.claim({ scope: fx.queue, key: 'busy-1' }, { leaseMs: 700 });
    expect(holder.outcome).toBe('ACQUIRED');
    const seen: RabbitMqHandlerContext[] = [];
    const started = Date.now();
    // No wait for the holder's outcome: the delay-tier path itself is under test (conflict-wait.test.ts
    // covers the wait).
    const { events } = await fx.consumer(idempotency, { fingerprint: false, conflictWaitMs: 0 }, (ctx) => {
      seen.push(ctx);
    });
    fx.publish({ amount: 5 }, { messageId: 'busy-1' });
    await waitFor('the completion', () => acks(events).length === 1, 10_000);
    const elapsed = Date.now() - started;
    expect(seen).toHaveLength(1);
    expect(seen[0]).toMatchObject({ outcome: 'ACQUIRED_STALE', attempt: 2 });
    expect(seen[0]!.fencingToken).toBeGreaterThan(holder.fencingToken);
    // Delay tiers are 100/300/1000 ms: a ~700 ms remaining lease rounds up to the 1000 ms tier, once.
    expect(events.retryScheduled.length).toBeGreaterThanOrEqual(1);
    expect(events.retryScheduled.length).toBeLessThanOrEqual(2);
    expect(events.retryScheduled[0]).toMatchObject({
      reason: 'conflict',
      outcome: 'CONFLICT',
      delayMs: 1000,
    });
    expect(events.retryScheduled[0]!.wantedDelayMs).toBeGreaterThan(300);
    expect(events.retryScheduled[0]!.wantedDelayMs).toBeLessThanOrEqual(700);
    expect(elapsed).toBeGreaterThanOrEqual(700);
  });

  it('handler threw (retryable): released, delayed by the backoff, then succeeds', async () => {
    const attempts: { attempt: number; header: unknown }[] = [];
    const { events } = await fx.consumer(fx.idempotency(), {}, (ctx) => {
      attempts.push({
        attempt: ctx.attempt,
        header: ctx.message.properties.headers?.[RETRY_HEADERS.attempt],
      });
      if (ctx.attempt === 1) throw new Error('payment provider timed out');
      return 'ok';
    });
    fx.publish({ amount: 7 }, { messageId: 'flaky-1' });
    await waitFor('the ack', () => acks(events).length === 1);
    expect(attempts).toEqual([
      { attempt: 1, header: undefined },
      { attempt: 2, header: 1 },
    ]);
    expect(events.retryScheduled).toHaveLength(1);
    expect(events.retryScheduled[0]).toMatchObject({
      reason: 'handler-error',
      attempt: 1,
      wantedDelayMs: 100,
      delayMs: 100,
      delayQueue: `${fx.queue}.delay.100ms`,
    });
    // What the handler threw, as in the Kafka and SQS adapters (its text before).
    expect(events.retryScheduled[0]!.error).toBeInstanceOf(Error);
    expect((events.retryScheduled[0]!.error as Error).message).toContain('payment provider timed out');
    expect(acks(events)[0]).toMatchObject({ decision: { reason: 'completed' }, outcome: 'ACQUIRED' });
  });

  it('attempts exhausted: the record FAILS and the message goes to the dead-letter exchange with headers', async () => {
    const idempotency = fx.idempotency({ maxAttempts: 3 });
    let runs = 0;
    const { events } = await fx.consumer(idempotency, {}, () => {
      runs += 1;
      throw new Error(`still down (${runs})`);
    });
    fx.publish({ amount: 9 }, { messageId: 'doomed-1', persistent: true });
    const [dead] = await fx.deadLetters(1);
    expect(runs).toBe(3);
    expect(events.retryScheduled.map((e) => e.attempt)).toEqual([1, 2]);
    const headers = dead!.properties.headers!;
    expect(headers[DEAD_LETTER_HEADERS.reason]).toBe('attempts-exhausted');
    expect(headers[DEAD_LETTER_HEADERS.attempt]).toBe(3);
    expect(headers[DEAD_LETTER_HEADERS.outcome]).toBe('ACQUIRED');
    expect(headers[DEAD_LETTER_HEADERS.error]).toBe('Error: still down (3)');
    expect(headers[DEAD_LETTER_HEADERS.originalQueue]).toBe(fx.queue);
    expect(headers[DEAD_LETTER_HEADERS.key]).toBe('doomed-1');
    expect(headers[DEAD_LETTER_HEADERS.scope]).toBe(fx.queue);
    expect(dead!.properties.messageId).toBe('doomed-1');
    expect(dead!.properties.deliveryMode).toBe(2);
    expect(JSON.parse(dead!.content.toString())).toEqual({ amount: 9 });
    const record = await idempotency.store.get({ scope: fx.queue, key: 'doomed-1' });
    expect(record).toMatchObject({ state: 'FAILED', attempt: 3 });
    await waitFor('the deadLettered event', () => events.deadLettered.length === 1);
    expect(events.deadLettered[0]).toMatchObject({ reason: 'attempts-exhausted', attempt: 3 });
    // The record is marked dead-lettered once its copy is confirmed: a later delivery of the same key is
    // acked without running and without a second copy.
    await waitFor('the mark', async () =>
      Boolean((await idempotency.store.get({ scope: fx.queue, key: 'doomed-1' }))?.deadLettered),
    );
    fx.publish({ amount: 9 }, { messageId: 'doomed-1' });
    await waitFor('the redelivery acked', () =>
      events.settled.some((e) => e.decision.action === 'ack' && e.decision.reason === 'dead-lettered-before'),
    );
    expect(await fx.depth(`${fx.queue}.dlq`)).toBe(0);
    expect(runs).toBe(3);
  });

  it('non-retryable error: dead-lettered at once, the handler ran once', async () => {
    let runs = 0;
    const { events } = await fx.consumer(fx.idempotency(), {}, () => {
      runs += 1;
      throw new NonRetryableError('card declined');
    });
    fx.publish({ amount: 3 }, { messageId: 'declined-1' });
    const [dead] = await fx.deadLetters(1);
    expect(runs).toBe(1);
    expect(events.retryScheduled).toHaveLength(0);
    expect(dead!.properties.headers![DEAD_LETTER_HEADERS.reason]).toBe('non-retryable');
    expect(dead!.properties.headers![DEAD_LETTER_HEADERS.error]).toBe(
      'NonRetryableError [NON_RETRYABLE]: card declined',
    );
  });

  it('PAYLOAD_MISMATCH: the same key with another payload is dead-lettered and never run', async () => {
    const bodies: unknown[] = [];
    const { events } = await fx.consumer(fx.idempotency(), { prefetch: 1 }, (ctx) => {
      bodies.push(JSON.parse(ctx.message.content.toString()));
    });
    fx.publish({ amount: 10 }, { messageId: 'pay-9' });
    fx.publish({ amount: 99_999 }, { messageId: 'pay-9' });
    const [dead] = await fx.deadLetters(1);
    expect(bodies).toEqual([{ amount: 10 }]);
    expect(dead!.properties.headers![DEAD_LETTER_HEADERS.reason]).toBe('payload-mismatch');
    expect(dead!.properties.headers![DEAD_LETTER_HEADERS.outcome]).toBe('PAYLOAD_MISMATCH');
    // The same text in every broker's dead letter (deadLetterOf in the core kit).
    expect(dead!.properties.headers![DEAD_LETTER_HEADERS.error]).toBe(
      'PayloadMismatchError [PAYLOAD_MISMATCH]: the idempotency key was first used with another payload (record COMPLETED)',
    );
    expect(JSON.parse(dead!.content.toString())).toEqual({ amount: 99_999 });
    await waitFor('both settled', () => acks(events).length + events.deadLettered.length === 2);
  });

  it('missing key, policy dead-letter: dead-lettered with its reason, never run', async () => {
    let runs = 0;
    const { events } = await fx.consumer(fx.idempotency(), { missingKey: 'dead-letter' }, () => {
      runs += 1;
    });
    fx.publish({ amount: 1 });
    const [dead] = await fx.deadLetters(1);
    expect(runs).toBe(0);
    expect(dead!.properties.headers![DEAD_LETTER_HEADERS.reason]).toBe('missing-key');
    expect(dead!.properties.headers![DEAD_LETTER_HEADERS.outcome]).toBe('NONE');
    expect(dead!.properties.headers![DEAD_LETTER_HEADERS.key]).toBeUndefined();
    await waitFor('the missingKey event', () => events.missingKey.length === 1);
    expect(events.missingKey[0]).toMatchObject({ action: 'dead-letter', key: undefined });
  });

  it('missing key, policy process: runs without idempotency and says so', async () => {
    const seen: RabbitMqHandlerContext[] = [];
    const { events } = await fx.consumer(fx.idempotency(), { missingKey: 'process' }, (ctx) => {
      seen.push(ctx);
    });
    fx.publish({ amount: 1 });
    await waitFor('the ack', () => acks(events).length === 1);
    expect(seen).toHaveLength(1);
    expect(seen[0]).toMatchObject({ key: undefined, fencingToken: 0, outcome: 'UNPROTECTED', attempt: 1 });
    expect(events.missingKey).toEqual([expect.objectContaining({ action: 'process' })]);
    expect(acks(events)[0]).toMatchObject({ decision: { reason: 'unprotected' }, outcome: 'UNPROTECTED' });
    expect(await fx.redis.keys(`${fx.prefix}:*`)).toEqual([]);
  });

  it('checks its topology: a delay tier declared with another TTL is a TopologyMismatchError', async () => {
    await fx.channel.assertQueue(`${fx.queue}.delay.100ms`, {
      durable: true,
      arguments: { 'x-message-ttl': 5 },
    });
    fx.extraQueues.push(`${fx.queue}.delay.100ms`);
    await expect(fx.consumer(fx.idempotency(), {}, () => {})).rejects.toMatchObject({
      name: 'TopologyMismatchError',
      code: 'TOPOLOGY_MISMATCH',
    });
    // `check` mode on a queue that does not exist.
    await expect(
      fx.consumer(fx.idempotency(), { topology: 'check', delayQueuePrefix: `${fx.queue}.nothing` }, () => {}),
    ).rejects.toMatchObject({ name: 'TopologyMismatchError' });
    // The fixture's own channel survived (the checks ran on a scratch channel).
    expect(await fx.depth()).toBe(0);
  });
});
