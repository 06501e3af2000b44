import { connect } from 'amqplib';
import { waitFor } from '../../support/net';
import { forceCloseConnection, rabbitmqctlUnavailable } from '../../support/rabbitmqctl';
import { describeWithServices } from '../../support/service';
import { acks, pause, RabbitFixture, uniqueName } from './fixture';

const MESSAGES = 40;

describeWithServices(['rabbitmq', 'redis'], 'rabbitmq adapter: the connection drops mid-run', (urls) => {
  jest.setTimeout(90_000);
  const unavailable = rabbitmqctlUnavailable();
  const itWithCtl = unavailable ? it.skip : it;
  if (unavailable) process.stderr.write(`[integration] SKIPPED broker-forced close: ${unavailable}\n`);
  const fx = RabbitFixture.eachTest(urls);

  itWithCtl(
    `with connect: reconnects by itself, loses nothing, runs each message once${unavailable ? ` [skipped: ${unavailable}]` : ''}`,
    async () => {
      const name = uniqueName('conn');
      let opened = 0;
      const handlerRuns = new Map<string, number>();
      const { consumer, events } = await fx.consumer(
        fx.idempotency({ leaseMs: 5000 }),
        { prefetch: 4, reconnectBackoff: { baseMs: 100, maxMs: 400, jitter: 'none' } },
        async ({ key }) => {
          handlerRuns.set(key!, (handlerRuns.get(key!) ?? 0) + 1);
          // Long enough that deliveries are in flight when the connection drops.
          await pause(150);
          await fx.effect(key!);
        },
        {
          connect: async () => {
            opened += 1;
            return connect(urls.rabbitmq, { clientProperties: { connection_name: name } });
          },
        },
      );
      for (let i = 0; i < MESSAGES; i++) fx.publish({ n: i }, { messageId: `m-${i}` });
      await waitFor('a few acks', () => acks(events).length >= 4, 20_000);
      const ranBeforeClose = handlerRuns.size;
      await forceCloseConnection(name, 'dropped by the reconnect test');
      await waitFor('the consume channel reported closed', () =>
        events.channelClosed.some((e) => e.channel === 'consume'),
      );
      expect(events.channelClosed.find((e) => e.channel === 'consume')?.reason).toMatchObject({
        replyCode: 320,
        closed: 'connection',
      });
      await waitFor('the reconnect', () => events.reconnected.length === 1, 20_000);
      expect(opened).toBeGreaterThanOrEqual(2);
      expect(consumer.state).toBe('running');
      const effects = await fx.allDone(events, MESSAGES, 45_000, 30_000);
      // Exactly once: a delivery in flight at the drop completed and recorded COMPLETED; its ack could not
      // leave, and its redelivery was a DUPLICATE (or waited for it), never a second run.
      expect(Object.values(effects).filter((count) => count !== '1')).toEqual([]);
      expect([...handlerRuns.values()].filter((n) => n !== 1)).toEqual([]);
      expect(ranBeforeClose).toBeGreaterThan(0);
      expect(events.deadLettered).toEqual([]);
      await consumer.stop();
      expect(await fx.depth()).toBe(0);
    },
  );
});
