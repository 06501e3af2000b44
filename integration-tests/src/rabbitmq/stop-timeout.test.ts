import type { Idempotency } from '@idempotent-consumer/core';
import type { RabbitMqHandler, RabbitMqIdempotencyDependencies } from '@idempotent-consumer/rabbitmq';
import { type ChannelModel, connect } from 'amqplib';
import { AmqpProxy } from '../../support/amqp-proxy';
import { settlesWithin, waitFor } from '../../support/net';
import { describeWithServices } from '../../support/service';
import { acks, RabbitFixture } from './fixture';

/**
 * `stop()` is bounded by `stopTimeoutMs` on a real broker: a handler that never returns, or a connection
 * the broker stopped reading (a memory or disk alarm blocks it: `basic.cancel`, acks, `channel.close` and
 * `connection.close` get no answer), end in deliveries abandoned, unacked, and redelivered to the next
 * consumer, never lost. Bounds are generous (a busy 2-core machine): `stop()` used to stay pending.
 */
describeWithServices(['rabbitmq', 'redis'], 'rabbitmq adapter: stop() within stopTimeoutMs', (urls) => {
  jest.setTimeout(60_000);
  const fx = RabbitFixture.eachTest(urls);
  const STOP_TIMEOUT_MS = 300;
  /** Far above `STOP_TIMEOUT_MS` + the 1 s the closes get at least. */
  const STOP_BOUND_MS = 15_000;

  /** A handler that runs the side effect only once released (after `stop()`), ignoring its signal. */
  function heldHandler() {
    const held = { started: 0, aborted: false, release: () => {} };
    const handler: RabbitMqHandler<unknown> = async ({ key, signal }) => {
      held.started += 1;
      signal.addEventListener('abort', () => (held.aborted = true), { once: true });
      await new Promise<void>((resolve) => (held.release = resolve));
      await fx.effect(key!);
      return 'done';
    };
    return { held, handler };
  }

  /** Resolves when `idempotency` recorded a COMPLETED outcome. */
  const completedOn = (idempotency: Idempotency) =>
    new Promise((resolve) => idempotency.once('completed', resolve));

  /**
   * A second consumer on the work queue (the fixture's own connection), whose handler counts side effects:
   * the abandoned message must reach it, redelivered, and be acked there as a DUPLICATE of the first run.
   */
  async function nextConsumerAcksDuplicate(key: string): Promise<void> {
    const { events } = await fx.consumer(fx.idempotency(), {}, async ({ key: k }) => {
      await fx.effect(k!);
    });
    await waitFor('the redelivery to be acked', () => acks(events).length === 1, 20_000);
    expect(events.delivery[0]!.redelivered).toBe(true);
    expect(acks(events)[0]).toMatchObject({ key, outcome: 'DUPLICATE' });
    expect(await fx.effects()).toEqual({ [key]: '1' });
    await waitFor('the work queue to be empty', async () => (await fx.depth()) === 0);
  }

  /**
   * A consumer (on `dependencies`, else the fixture's connection) whose handler holds the message `key`
   * until after `stop()`: `beforeStop` runs once the handler runs. Asserts that `stop()` resolved within
   * the bound with `{ abandoned: 1 }` (and the `stopped` event), that the handler's signal aborted, and
   * that, the handler finishing afterwards (COMPLETED recorded), the consumer acked nothing.
   * @returns how long `stop()` took, in milliseconds.
   */
  async function abandonsHeldDelivery(
    key: string,
    dependencies?: Omit<RabbitMqIdempotencyDependencies, 'idempotency'>,
    beforeStop: () => void = () => {},
  ): Promise<number> {
    const idempotency = fx.idempotency();
    const { held, handler } = heldHandler();
    const { consumer, events } = await fx.consumer(
      idempotency,
      { stopTimeoutMs: STOP_TIMEOUT_MS },
      handler,
      dependencies,
    );
    fx.publish({ n: 1 }, { messageId: key });
    await waitFor('the handler to run', () => held.started === 1);
    beforeStop();

    const startedAt = performance.now();
    const settled = await settlesWithin('stop() to settle', consumer.stop(), STOP_BOUND_MS);
    const elapsedMs = performance.now() - startedAt;

    expect(settled).toEqual({ status: 'fulfilled', value: { abandoned: 1 } });
    expect(events.stopped).toEqual([{ queue: fx.queue, abandoned: 1 }]);
    // Reported as the SQS poller reports its abandoned messages: one `settled`, `leave`/`abandoned`.
    expect(events.settled).toEqual([
      expect.objectContaining({ key, decision: { action: 'leave', reason: 'abandoned' } }),
    ]);
    expect(held.aborted).toBe(true);
    // The handler finishes after stop(): the runner records COMPLETED; the consumer acks nothing.
    const completed = completedOn(idempotency);
    held.release();
    await completed;
    expect(acks(events)).toEqual([]);
    expect(events.settled).toHaveLength(1); // nothing more once the handler returned
    return elapsedMs;
  }

  it('a handler that never returns is abandoned after stopTimeoutMs: stop() resolves { abandoned: 1 }, and the message is redelivered to the next consumer, not lost, nor acked by the first', async () => {
    const elapsedMs = await abandonsHeldDelivery('stuck');
    expect(elapsedMs).toBeGreaterThanOrEqual(STOP_TIMEOUT_MS - 20);
    await nextConsumerAcksDuplicate('stuck');
  });

  it('a connection the broker stopped reading (blocked) does not hold stop(): the owned connection is ended, the broker requeues the message', async () => {
    await AmqpProxy.using(urls.rabbitmq, async (proxy, url) => {
      const owned: ChannelModel[] = [];
      const closed = new Set<ChannelModel>();
      const connectThroughProxy = async () => {
        const connection = await connect(url);
        owned.push(connection);
        connection.on('close', () => closed.add(connection));
        return connection;
      };
      await abandonsHeldDelivery('blocked', { connect: connectThroughProxy, logger: false }, () => {
        proxy.holding = true;
      });
      // Its close unanswered, the connection the consumer opened was ended with its socket: the broker
      // requeues the delivery now, not when a heartbeat times out.
      expect(owned).toHaveLength(1);
      expect(closed.has(owned[0]!)).toBe(true);
      await nextConsumerAcksDuplicate('blocked');
    });
  });

  it('a given connection the broker stopped reading does not hold stop() either, and is left open to its owner', async () => {
    await AmqpProxy.using(urls.rabbitmq, async (proxy, url) => {
      const given = await connect(url);
      given.on('error', () => {});
      let givenClosed = false;
      given.on('close', () => (givenClosed = true));
      try {
        await abandonsHeldDelivery('given', { connection: given, logger: false }, () => {
          proxy.holding = true;
        });
        expect(givenClosed).toBe(false);
      } finally {
        // The owner ends its connection (here with the proxy's sockets): the broker requeues the delivery.
        await proxy.close();
      }
      await waitFor('the given connection to close', () => givenClosed);
      await nextConsumerAcksDuplicate('given');
    });
  });
});
