import type { IdempotencyLogger } from '@idempotent-consumer/core';
import { DEAD_LETTER_HEADERS } from '@idempotent-consumer/rabbitmq';
import { waitFor } from '../../support/net';
import { describeWithServices } from '../../support/service';
import { RabbitFixture } from './fixture';

/** A logger that keeps what it was given. */
function recordingLogger(): IdempotencyLogger & { warnings: string[] } {
  const warnings: string[] = [];
  return { warnings, warn: (message) => warnings.push(message), error: (message) => warnings.push(message) };
}

describeWithServices(['rabbitmq', 'redis'], 'rabbitmq adapter: a producer that sets no messageId', (urls) => {
  jest.setTimeout(30_000);
  const fx = RabbitFixture.eachTest(urls);

  it('default key, no messageId: each message is dead-lettered with a missingKey event, and one warning is logged', async () => {
    const logger = recordingLogger();
    let runs = 0;
    const { events } = await fx.consumer(
      fx.idempotency(),
      {},
      () => {
        runs += 1;
      },
      { connection: fx.connection, logger },
    );
    // amqplib sets no messageId unless the producer does.
    for (let i = 0; i < 3; i++) fx.publish({ amount: i });
    const dead = await fx.deadLetters(3);
    expect(runs).toBe(0);
    expect(dead.map((m) => m.properties.headers![DEAD_LETTER_HEADERS.reason])).toEqual([
      'missing-key',
      'missing-key',
      'missing-key',
    ]);
    await waitFor('three missingKey events', () => events.missingKey.length === 3);
    expect(events.missingKey.every((e) => e.action === 'dead-letter' && e.key === undefined)).toBe(true);
    await waitFor('three settled', () => events.settled.length === 3);
    expect(events.settled.map((e) => e.decision.action)).toEqual([
      'dead-letter',
      'dead-letter',
      'dead-letter',
    ]);
    const keyWarnings = logger.warnings.filter((w) => w.includes('no idempotency key'));
    expect(keyWarnings).toHaveLength(1);
    expect(keyWarnings[0]).toContain(fx.queue);
    expect(keyWarnings[0]).toContain('messageId');
  });
});
