import { createIdempotentConsumer } from '@idempotent-consumer/rabbitmq';
import { connect } from 'amqplib';
import { waitFor } from '../../support/net';
import { forceCloseConnection, rabbitmqctlUnavailable } from '../../support/rabbitmqctl';
import { describeWithServices } from '../../support/service';
import { RabbitFixture, recordEvents, uniqueName } from './fixture';

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
});
