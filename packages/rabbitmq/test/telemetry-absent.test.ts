import { setTimeout as sleep } from 'node:timers/promises';
import { Idempotency, MemoryIdempotencyStore } from '@idempotent-consumer/core';
import { MessageTelemetry } from '@idempotent-consumer/core/kit';
import { createIdempotentConsumer } from '../src';
import { fakeConnection } from './fake-amqp';

// `@opentelemetry/api` is an optional peer dependency: here it cannot be loaded, as when it is not
// installed. The consumer must work as without telemetry.
jest.mock(
  '@opentelemetry/api',
  () => {
    throw Object.assign(new Error("Cannot find module '@opentelemetry/api'"), { code: 'MODULE_NOT_FOUND' });
  },
  { virtual: true },
);

describe('IdempotentConsumer without @opentelemetry/api', () => {
  it('consumes, acks, and acks the duplicate, with a traceparent header on the message', async () => {
    expect(() => require('@opentelemetry/api')).toThrow(/Cannot find module/);
    // The kit's loader sees the same: telemetry is off.
    const probe = new MessageTelemetry(
      {
        system: 'rabbitmq',
        destinationOf: () => 'work',
        headersOf: () => undefined,
      },
      undefined,
    );
    expect(probe.enabled).toBe(false);
    const fake = fakeConnection();
    const idempotency = new Idempotency({ store: new MemoryIdempotencyStore() }, { leaseMs: 1000 });
    const runs: string[] = [];
    const consumer = createIdempotentConsumer(
      { idempotency, connection: fake.connection, logger: false },
      { queue: 'work', telemetry: { includeIdempotencyKey: true } },
      ({ key }) => {
        runs.push(key!);
      },
    );
    await consumer.start();
    const headers = { traceparent: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01' };
    fake.channel.deliver('{}', { messageId: 'k1', headers });
    fake.channel.deliver('{}', { messageId: 'k1', headers });
    const deadline = Date.now() + 5000;
    while (fake.channel.acked.length < 2 && Date.now() < deadline) await sleep(2);
    expect(fake.channel.acked).toHaveLength(2);
    expect(runs).toEqual(['k1']);
    await consumer.stop();
  });
});
