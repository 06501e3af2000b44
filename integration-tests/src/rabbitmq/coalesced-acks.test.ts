import { connect } from 'amqplib';
import { waitFor } from '../../support/net';
import { describeWithServices } from '../../support/service';
import { acks, RabbitFixture } from './fixture';

/**
 * The consumer acks a prefetch window with `multiple` acks (DeliveryAcks). On the real broker: every ack
 * arrives (nothing comes back after the channel closes), none is sent twice (RabbitMQ closes the channel
 * on an unknown delivery tag), and a delivery still being handled is never covered by a later `multiple`
 * ack (it comes back when its connection drops).
 */
describeWithServices(['rabbitmq', 'redis'], 'rabbitmq adapter: coalesced acks', (urls) => {
  jest.setTimeout(30_000);
  const fx = RabbitFixture.eachTest(urls);
  const count = 300;

  it('acks every delivery of a busy window exactly once', async () => {
    const { consumer, events } = await fx.consumer(fx.idempotency(), { prefetch: 64 }, async () => {});
    for (let i = 0; i < count; i++) fx.publish({ i }, { messageId: `m-${i}` });
    await waitFor('every ack', () => acks(events).length === count, 20_000);
    await consumer.stop();
    expect(events.channelClosed).toEqual([]);
    expect(events.brokerError).toEqual([]);
    expect(await fx.depth()).toBe(0); // a lost ack would have been requeued by the close
  });

  it('never acks a delivery whose handler is still running, whatever is acked after it', async () => {
    const connection = await connect(fx.amqpUrl);
    connection.on('error', () => {});
    let release!: () => void;
    const held = new Promise<void>((resolve) => {
      release = resolve;
    });
    let heldStarted = false;
    const { events } = await fx.consumer(
      fx.idempotency({ leaseMs: 30_000 }),
      { prefetch: 64 },
      async ({ key }) => {
        if (key !== 'm-100') return;
        heldStarted = true;
        await held;
      },
      { connection },
    );
    for (let i = 0; i < count; i++) fx.publish({ i }, { messageId: `m-${i}` });
    await waitFor('every other ack', () => heldStarted && acks(events).length === count - 1, 20_000);
    expect(acks(events).some((e) => e.key === 'm-100')).toBe(false);
    // The connection drops with m-100 unacked: the broker requeues it, and only it.
    await connection.close();
    release();
    await waitFor('m-100 back in the queue', async () => (await fx.depth()) === 1, 10_000);
    const back = await fx.channel.get(fx.queue, { noAck: true });
    expect(back ? back.properties.messageId : 'nothing').toBe('m-100');
    expect(await fx.depth()).toBe(0);
  });
});
