import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  Idempotency,
  InvalidOptionError,
  MemoryIdempotencyStore,
  NonRetryableError,
} from '@idempotent-consumer/core';
import { createIdempotentConsumer, type RabbitMqHandler, type RabbitMqIdempotencyOptions } from '../src';
import type { AmqpConnection } from '../src/amqp-types';
import { resolveConsumerOptions } from '../src/options';
import { fakeConnection, fakeOwnedConnection } from './fake-amqp';

/**
 * `stop()` is bounded by `stopTimeoutMs`: a handler that never returns, a publisher confirm that never
 * comes, a `basic.cancel` or `channel.close` the broker does not answer (a connection blocked by a memory
 * or disk alarm) end in deliveries abandoned, never in a `stop()` that waits for ever. Bounds asserted here
 * are generous (a busy 2-core machine): what is guaranteed is that `stop()` resolves at all, long before
 * the bound, where it used to stay pending.
 */

const STOP_TIMEOUT_MS = 100;
/** Far above `STOP_TIMEOUT_MS` + the 1 s the closes get at least: a stop() still pending then hangs. */
const HANG_MS = 4000;

const FAST: Partial<RabbitMqIdempotencyOptions> = {
  delayTiersMs: [10, 50, 200],
  retryBackoff: { baseMs: 10, maxMs: 50, jitter: 'none' },
  stopTimeoutMs: STOP_TIMEOUT_MS,
};

function build(
  handler: RabbitMqHandler<unknown>,
  connection: { connection: AmqpConnection } | { connect: () => Promise<AmqpConnection> },
) {
  const idempotency = new Idempotency(
    { store: new MemoryIdempotencyStore(), logger: false },
    { leaseMs: 5000, maxAttempts: 3 },
  );
  const consumer = createIdempotentConsumer(
    { idempotency, ...connection, logger: false },
    { queue: 'work', ...FAST },
    handler,
  );
  const stopped: unknown[] = [];
  consumer.on('stopped', (e) => stopped.push(e));
  const settled: string[] = [];
  const order: string[] = [];
  consumer.on('settled', (e) => {
    settled.push(`${e.decision.action}:${e.decision.reason}:${e.source.deliveryTag}:${e.key}`);
    order.push('settled');
  });
  consumer.on('stopped', () => order.push('stopped'));
  const brokerErrors: string[] = [];
  consumer.on('brokerError', (e) => brokerErrors.push(e.operation));
  const deliveries: number[] = [];
  consumer.on('delivery', (e) => deliveries.push(e.deliveryTag));
  return { idempotency, consumer, stopped, settled, order, brokerErrors, deliveries };
}

/** `stop()`, or `'still pending'` when it has not resolved within {@link HANG_MS}. */
async function stopWithin(consumer: { stop(): Promise<unknown> }) {
  const startedAt = performance.now();
  const result = await Promise.race([consumer.stop(), sleep(HANG_MS).then(() => 'still pending' as const)]);
  return { result, elapsedMs: performance.now() - startedAt };
}

const until = async (what: string, check: () => boolean, timeoutMs = 2000) => {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(2);
  }
};

/** A handler that never returns until released, and says whether its signal aborted. */
function heldHandler() {
  const held = { started: 0, aborted: undefined as unknown, release: (_value?: unknown) => {} };
  const handler: RabbitMqHandler<unknown> = ({ signal }) =>
    new Promise((resolve) => {
      held.started += 1;
      held.release = resolve;
      signal.addEventListener('abort', () => (held.aborted = signal.reason ?? 'aborted'), { once: true });
    });
  return { held, handler };
}

describe('IdempotentConsumer.stop() within stopTimeoutMs (fake channels)', () => {
  it('gives up on a handler that never returns: resolves { abandoned: 1 }, reports it settled leave/abandoned once before stopped, aborts its signal, and acks nothing for it, not even once it returns', async () => {
    const fake = fakeConnection();
    const { held, handler } = heldHandler();
    const { idempotency, consumer, stopped, settled, order } = build(handler, {
      connection: fake.connection,
    });
    await consumer.start();
    fake.channel.deliver('{}', { messageId: 'stuck' });
    await until('the handler to run', () => held.started === 1);

    const { result } = await stopWithin(consumer);

    expect(result).toEqual({ abandoned: 1 });
    expect(stopped).toEqual([{ queue: 'work', abandoned: 1 }]);
    // As the SQS poller's: one `settled` with `leave`/`abandoned` (the key read), before `stopped`.
    expect(settled).toEqual(['leave:abandoned:1:stuck']);
    expect(order).toEqual(['settled', 'stopped']);
    expect(consumer.state).toBe('stopped');
    expect(held.aborted).toBeDefined();
    // The handler returns after stop(): the runner records its outcome (its redelivery is then a
    // DUPLICATE), but the consumer sends nothing more for the delivery.
    const completed = new Promise((resolve) => idempotency.once('completed', resolve));
    held.release('late');
    await completed;
    await sleep(20);
    expect(fake.channel.acked).toEqual([]);
    expect(fake.channel.nacked).toEqual([]);
    expect(settled).toEqual(['leave:abandoned:1:stuck']); // nothing more once it returns
  });

  it.each([
    ['a delay tier (retryable error)', () => new Error('boom'), 'work.delay.10ms', false],
    ['the dead-letter exchange (non-retryable error)', () => new NonRetryableError('declined'), 'work', true],
  ])(
    'gives up on a copy to %s whose publisher confirm never comes: no ack after its late confirm',
    async (_what, error, routingKey, marksDeadLettered) => {
      const fake = fakeConnection();
      fake.confirm.autoConfirm = false;
      const { idempotency, consumer, stopped, settled, brokerErrors } = build(
        () => {
          throw error();
        },
        { connection: fake.connection },
      );
      await consumer.start();
      fake.channel.deliver('{}', { messageId: 'k' });
      await until('the copy to be published', () => fake.confirm.published.length === 1);
      expect(fake.confirm.published[0]!.routingKey).toBe(routingKey);

      const { result } = await stopWithin(consumer);

      expect(result).toEqual({ abandoned: 1 });
      expect(stopped).toEqual([{ queue: 'work', abandoned: 1 }]);
      expect(settled).toEqual(['leave:abandoned:1:k']);
      fake.confirm.published[0]!.confirm(); // the broker confirms after all
      await sleep(30);
      expect(fake.channel.acked).toEqual([]);
      expect(fake.channel.nacked).toEqual([]);
      expect(fake.confirm.published).toHaveLength(1);
      expect(settled).toEqual(['leave:abandoned:1:k']); // nothing more after the late confirm
      expect(brokerErrors).toEqual([]);
      // A dead-letter copy confirmed late is still recorded on the FAILED record (a store write, not a
      // broker action): its redelivery is acked without a second copy.
      const record = await idempotency.store.get({ scope: 'work', key: 'k' });
      expect(record?.deadLettered ?? false).toBe(marksDeadLettered);
    },
  );

  it('a basic.cancel and channel closes the broker never answers (a blocked connection) do not hold stop(); the given connection is left to its owner', async () => {
    const fake = fakeConnection();
    const { held, handler } = heldHandler();
    const { consumer, stopped, settled, brokerErrors, deliveries } = build(handler, {
      connection: fake.connection,
    });
    await consumer.start();
    fake.channel.unanswered.add('cancel').add('close');
    fake.confirm.closeUnanswered = true;
    fake.channel.deliver('{}', { messageId: 'stuck' });
    await until('the handler to run', () => held.started === 1);

    const { result, elapsedMs } = await stopWithin(consumer);

    expect(result).toEqual({ abandoned: 1 });
    expect(elapsedMs).toBeGreaterThanOrEqual(STOP_TIMEOUT_MS - 5);
    expect(stopped).toEqual([{ queue: 'work', abandoned: 1 }]);
    // The broker, cancel unanswered, delivers again before it reads the channel's close: nothing runs,
    // nothing is settled but the abandoned one, no error is reported (the broker requeues it with the channel).
    fake.channel.deliver('{}', { messageId: 'after-stop' });
    held.release('late');
    await sleep(30);
    expect(held.started).toBe(1);
    expect(deliveries).toEqual([1]);
    expect(fake.channel.acked).toEqual([]);
    expect(fake.channel.nacked).toEqual([]);
    expect(settled).toEqual(['leave:abandoned:1:stuck']);
    expect(brokerErrors).toEqual([]);
  });

  it('an owned connection whose channel and connection closes are never answered is ended with its socket', async () => {
    const fake = fakeOwnedConnection();
    const { consumer, stopped } = build(() => 'ok', { connect: async () => fake.connection });
    await consumer.start();
    fake.channel.unanswered.add('cancel').add('close');
    fake.confirm.closeUnanswered = true;
    fake.state.closeUnanswered = true;

    const { result } = await stopWithin(consumer);

    expect(result).toEqual({ abandoned: 0 });
    expect(stopped).toEqual([{ queue: 'work', abandoned: 0 }]);
    expect(fake.state.destroyedWith).toBeInstanceOf(Error);
  });

  it('a start() whose channel open is never answered does not hold stop(); the channel that opens late is closed, nothing is consumed', async () => {
    const fake = fakeConnection();
    let opens = 0;
    let answer = () => {};
    const answered = new Promise<void>((resolve) => (answer = resolve));
    const create = fake.connection.createChannel.bind(fake.connection);
    fake.connection.createChannel = async () => {
      opens += 1;
      if (opens === 2) await answered; // the consume channel (the first is the topology check's)
      return create();
    };
    const { consumer, stopped } = build(() => 'ok', { connection: fake.connection });
    const starting = consumer.start();
    await until('the consume channel to be asked for', () => opens === 2);

    const { result } = await stopWithin(consumer);

    expect(result).toEqual({ abandoned: 0 });
    expect(stopped).toEqual([{ queue: 'work', abandoned: 0 }]);
    const closed = new Promise((resolve) => fake.channel.once('close', resolve));
    answer();
    await expect(starting).resolves.toBeUndefined();
    await closed;
    expect(fake.channel.consumes).toBe(0);
    expect(consumer.state).toBe('stopped');
  });

  it('a start() whose topology check is never answered does not hold stop(); the connection it opened is closed once the check ends', async () => {
    const fake = fakeOwnedConnection();
    let answer = () => {};
    const answered = new Promise<void>((resolve) => (answer = resolve));
    const create = fake.connection.createChannel.bind(fake.connection);
    let opens = 0;
    fake.connection.createChannel = async () => {
      opens += 1;
      if (opens === 1) await answered; // the topology check's channel
      return create();
    };
    const { consumer } = build(() => 'ok', { connect: async () => fake.connection });
    const starting = consumer.start();
    await until('the topology check to ask for its channel', () => opens === 1);

    const { result } = await stopWithin(consumer);

    expect(result).toEqual({ abandoned: 0 });
    answer();
    await expect(starting).resolves.toBeUndefined();
    expect(fake.state.closed).toBe(true);
    expect(fake.channel.consumes).toBe(0);
  });

  it('a stop with nothing in flight abandons nothing, and every call resolves with the first one’s result', async () => {
    const fake = fakeConnection();
    const { consumer, stopped } = build(() => 'ok', { connection: fake.connection });
    await consumer.start();
    fake.channel.deliver('{}', { messageId: 'k' });
    await until('ack', () => fake.channel.acked.length === 1);
    const first = consumer.stop();
    const second = consumer.stop();
    expect(second).toBe(first);
    expect(await first).toEqual({ abandoned: 0 });
    expect(stopped).toEqual([{ queue: 'work', abandoned: 0 }]);
  });
});

describe('stopTimeoutMs option', () => {
  it('defaults to 30000, as the SQS poller’s', () => {
    expect(resolveConsumerOptions({ queue: 'work' }, 1000).stopTimeoutMs).toBe(30_000);
    expect(resolveConsumerOptions({ queue: 'work', stopTimeoutMs: 0 }, 1000).stopTimeoutMs).toBe(0);
  });

  it.each([
    [-1, 'stopTimeoutMs must be an integer >= 0, got -1'],
    [1.5, 'stopTimeoutMs must be an integer >= 0, got 1.5'],
    [2 ** 31, 'stopTimeoutMs must be at most 2147483647, got 2147483648'],
  ])('refuses %p, with the SQS poller’s message', (value, message) => {
    expect(() => resolveConsumerOptions({ queue: 'work', stopTimeoutMs: value }, 1000)).toThrow(
      new InvalidOptionError(message),
    );
  });
});
