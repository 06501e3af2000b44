import { NonRetryableError, TopologyMismatchError } from '@idempotent-consumer/core';
import { DEAD_LETTER_HEADERS } from '@idempotent-consumer/nats';
import { waitFor } from '../../support/net';
import { describeWithServices } from '../../support/service';
import { acks, NatsFixture } from './fixture';

describeWithServices(['nats', 'redis'], 'nats adapter: outcomes on a real JetStream', (urls) => {
  const fx = NatsFixture.eachTest(urls);

  it('acks a completed message; a duplicate published after the stream forgot its Nats-Msg-Id is acked without running', async () => {
    const runs: string[] = [];
    const { events } = await fx.consumer(fx.idempotency(), {}, async ({ key, outcome }) => {
      runs.push(`${key} ${outcome}`);
      await fx.effect(key!);
      return { receipt: key };
    });
    await fx.publish('pay-1');
    await waitFor('the first to be acked', () => acks(events).length === 1);
    await fx.publish('pay-1');
    await waitFor('the duplicate to be acked', () => acks(events).length === 2);
    expect(runs).toEqual(['pay-1 ACQUIRED']);
    expect(events.settled.map((e) => e.decision)).toEqual([
      { action: 'ack', reason: 'completed' },
      { action: 'ack', reason: 'duplicate' },
    ]);
    expect(events.settled[1]).toMatchObject({
      outcome: 'DUPLICATE',
      source: { streamSequence: 2, deliveryCount: 1 },
    });
    expect(await fx.effects()).toEqual({ 'pay-1': 1 });
    await waitFor('nothing pending', async () => (await fx.pending()).ackPending === 0);
  });

  it('poison messages: an invalid key, a missing key and an always-throwing handler end as dead letters', async () => {
    const idempotency = fx.idempotency({ maxAttempts: 3 });
    const { events } = await fx.consumer(
      idempotency,
      {
        idempotencyKey: (message) => {
          const key = message.headers?.get('Nats-Msg-Id');
          if (key === 'bad') throw new Error('unparsable key');
          return key || undefined;
        },
      },
      async ({ message }) => {
        if (message.json<{ poison?: boolean }>().poison) throw new Error('always fails');
      },
    );
    await fx.publish('bad');
    await fx.publish(undefined);
    await fx.publish('poison', { poison: true });
    const letters = await fx.deadLetters(3, 20_000);
    const byReason = Object.fromEntries(
      letters.map((m) => [m.headers!.get(DEAD_LETTER_HEADERS.reason), m.headers!]),
    );
    expect(Object.keys(byReason).sort()).toEqual(['attempts-exhausted', 'invalid-key', 'missing-key']);
    expect(byReason['attempts-exhausted']!.get(DEAD_LETTER_HEADERS.attempt)).toBe('3');
    expect(byReason['attempts-exhausted']!.get(DEAD_LETTER_HEADERS.error)).toBe('Error: always fails');
    expect(byReason['invalid-key']!.get(DEAD_LETTER_HEADERS.outcome)).toBe('NONE');
    expect(letters.every((m) => m.headers!.get(DEAD_LETTER_HEADERS.stream) === fx.stream)).toBe(true);
    // Three retries of each poison message were nak'ed with the backoff, then it was terminated.
    expect(events.retryScheduled.filter((e) => e.key === 'poison').map((e) => e.delayMs)).toEqual([100, 200]);
    expect(events.deadLettered).toHaveLength(3);
    await waitFor('nothing pending', async () => (await fx.pending()).ackPending === 0);
  }, 30_000);

  it('a NonRetryableError and a payload under a used key go to the dead-letter subject at once', async () => {
    let runs = 0;
    const { events } = await fx.consumer(fx.idempotency(), {}, async ({ message }) => {
      runs += 1;
      if (message.json<{ amount: number }>().amount < 0) throw new NonRetryableError('declined');
    });
    await fx.publish('neg', { amount: -1 });
    await fx.publish('pay-2', { amount: 1 });
    await waitFor('both settled', () => events.settled.length === 2);
    await fx.publish('pay-2', { amount: 2 });
    const letters = await fx.deadLetters(2);
    expect(letters.map((m) => m.headers!.get(DEAD_LETTER_HEADERS.reason)).sort()).toEqual([
      'non-retryable',
      'payload-mismatch',
    ]);
    expect(runs).toBe(2);
    const ended = events.settled.map((e) => `${e.key} ${e.decision.action}`).sort();
    expect(ended).toEqual(['neg dead-letter', 'pay-2 ack', 'pay-2 dead-letter']);
  });

  it('start() refuses a missing consumer, an ack_wait below the heartbeat and a dead-letter subject no stream captures', async () => {
    const idempotency = fx.idempotency({ leaseMs: 9000 });
    await expect(fx.consumer(idempotency, { consumer: 'nobody' }, () => {})).rejects.toThrow(/not found/);
    await fx.jsm.consumers.update(fx.stream, fx.durable, { ack_wait: 2e9 });
    await expect(fx.consumer(idempotency, {}, () => {})).rejects.toThrow(
      /ack_wait \(2000 ms\) must be above the lease heartbeat \(3000 ms\)/,
    );
    await expect(
      fx.consumer(fx.idempotency(), { deadLetterSubject: `${fx.stream}.work` }, () => {}),
    ).rejects.toThrow(TopologyMismatchError);
  });
});
