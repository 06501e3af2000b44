import { type AmqpConnection, createIdempotentConsumer } from '@idempotent-consumer/rabbitmq';
import { type Channel, connect } from 'amqplib';
import { AmqpProxy } from '../../support/amqp-proxy';
import { settlesWithin, waitFor } from '../../support/net';
import { forceCloseConnection, rabbitmqctlUnavailable } from '../../support/rabbitmqctl';
import { describeWithServices } from '../../support/service';
import { FAST, RabbitFixture, recordEvents, uniqueName } from './fixture';

describeWithServices(['rabbitmq', 'redis'], 'rabbitmq adapter: a channel closed by the broker', (urls) => {
  jest.setTimeout(60_000);
  const unavailable = rabbitmqctlUnavailable();
  const itWithCtl = unavailable ? it.skip : it;
  if (unavailable) process.stderr.write(`[integration] SKIPPED broker-forced close: ${unavailable}\n`);
  const fx = RabbitFixture.eachTest(urls);

  itWithCtl(
    `channelClosed carries the reply code and text of a broker-forced connection close${unavailable ? ` [skipped: ${unavailable}]` : ''}`,
    async () => {
      const name = uniqueName('forced');
      const connection = await connect(urls.rabbitmq, { clientProperties: { connection_name: name } });
      connection.on('error', () => {});
      const consumer = createIdempotentConsumer(
        { idempotency: fx.idempotency(), connection },
        { queue: fx.queue, prefetch: 1 },
        async () => 'ok',
      );
      const events = recordEvents(consumer);
      await consumer.start();
      await forceCloseConnection(name, 'operator closed it for the test');
      await waitFor('both channels reported closed', () => events.channelClosed.length === 2);
      for (const which of ['consume', 'publish'] as const) {
        const event = events.channelClosed.find((e) => e.channel === which);
        expect(event).toMatchObject({
          queue: fx.queue,
          error: expect.objectContaining({ code: 320 }),
          reason: {
            replyCode: 320,
            replyText: 'CONNECTION_FORCED - operator closed it for the test',
            closed: 'connection',
          },
        });
      }
      expect(consumer.state).toBe('closed');
      await consumer.stop();
    },
  );

  it('with connection: the connection closing while it reconnects after a consume channel closed makes it closed for good', async () => {
    const connection = await connect(urls.rabbitmq);
    connection.on('error', () => {});
    const channels: Channel[] = [];
    let reopen: Promise<void> | undefined;
    // The connection as the consumer sees it: the test gets its channels, and can hold the reconnect's
    // first channel until the connection has closed (so it closes while the consumer reconnects).
    const seen: AmqpConnection = {
      createChannel: async () => {
        await reopen;
        const channel = await connection.createChannel();
        channels.push(channel);
        return channel;
      },
      createConfirmChannel: () => connection.createConfirmChannel(),
      on: (event, listener) => connection.on(event, listener),
      off: (event, listener) => connection.off(event, listener),
    };
    const warnings: string[] = [];
    const consumer = createIdempotentConsumer(
      {
        idempotency: fx.idempotency(),
        connection: seen,
        logger: { warn: (message) => warnings.push(message), error: () => {} },
      },
      { ...FAST, queue: fx.queue, reconnectBackoff: { baseMs: 50, maxMs: 100, jitter: 'none' } },
      async () => 'ok',
    );
    fx.consumers.push(consumer);
    const events = recordEvents(consumer);
    await consumer.start();
    // channels[0] was the topology check's scratch channel; channels[1] is the consume channel.
    let release: () => void = () => {};
    reopen = new Promise((resolve) => (release = resolve));
    // A channel error closes the consume channel alone (as a consumer_timeout does): the consumer reconnects.
    await channels[1]!.checkQueue(uniqueName('missing')).catch(() => {});
    await waitFor('the consume channel reported closed', () =>
      events.channelClosed.some((e) => e.channel === 'consume'),
    );
    expect(consumer.state).toBe('reconnecting');
    await connection.close();
    release();
    await waitFor('the consumer closed for good', () => consumer.state === 'closed', 10_000);
    expect(consumer.reconnecting).toBe(false);
    expect(warnings.some((w) => w.includes('consumption stopped for good'))).toBe(true);
    await consumer.stop();
  });

  it('with connection: the broker going away while stop() closes a channel (no close-ok) does not hold stop()', async () => {
    await AmqpProxy.using(urls.rabbitmq, async (proxy, url) => {
      const connection = await connect(url);
      // The socket's end is the connection's 'error' ('Unexpected close'): the owner's to listen to.
      connection.on('error', () => {});
      const { consumer, events } = await fx.consumer(fx.idempotency(), {}, async () => 'ok', { connection });
      // The proxy ends the socket instead of forwarding the first channel.close: amqplib closes the channel
      // when its connection closes, and calls close()'s callback only on a close-ok.
      proxy.cutOn = 'channel.close';
      const stopped = await settlesWithin('stop() to settle', consumer.stop());
      expect(stopped.status).toBe('fulfilled');
      expect(proxy.cut).toBe(1);
      expect(consumer.state).toBe('stopped');
      expect(events.stopped).toHaveLength(1);
      expect(events.channelClosed).toEqual([]);
    });
  }, 30_000);

  it('with connection: the owner closing the connection while stop() closes a channel does not hold stop()', async () => {
    const connection = await connect(urls.rabbitmq);
    let ownerCloses = false;
    // Once armed, the owner's connection.close() follows the consumer's channel.close at once: amqplib
    // ignores the channel's close-ok on a closing connection, and calls close()'s callback only on it.
    const closingTheConnection = <C extends { close(): Promise<void> }>(channel: C): C => {
      const close = channel.close.bind(channel);
      channel.close = () => {
        const closing = close();
        if (ownerCloses) void connection.close().catch(() => {});
        return closing;
      };
      return channel;
    };
    const seen: AmqpConnection = {
      createChannel: async () => closingTheConnection(await connection.createChannel()),
      createConfirmChannel: async () => closingTheConnection(await connection.createConfirmChannel()),
      on: (event, listener) => connection.on(event, listener),
      off: (event, listener) => connection.off(event, listener),
    };
    const { consumer, events } = await fx.consumer(fx.idempotency(), {}, async () => 'ok', {
      connection: seen,
    });
    ownerCloses = true;
    const stopped = await settlesWithin('stop() to settle', consumer.stop());
    expect(stopped.status).toBe('fulfilled');
    expect(consumer.state).toBe('stopped');
    expect(events.stopped).toHaveLength(1);
  });
});
