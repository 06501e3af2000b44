import { waitFor } from '../../support/net';
import { describeWithServices } from '../../support/service';
import { acks, RabbitFixture } from './fixture';

describeWithServices(
  ['rabbitmq', 'redis'],
  'rabbitmq adapter: a duplicate delivered while the original runs',
  (urls) => {
    jest.setTimeout(60_000);
    const fx = RabbitFixture.eachTest(urls);

    it('50 payments each delivered twice at once, handler 20 ms, lease 30 s: all 100 settled in under 3 s, each charged once', async () => {
      const charges = new Map<string, number>();
      // The default delay tiers (1 s, 5 s, 30 s, 2 min): without the wait for the holder, a copy that met the
      // running original would go to the 30 s tier.
      const { events } = await fx.consumer(
        fx.idempotency({ leaseMs: 30_000 }),
        { prefetch: 100, delayTiersMs: [1000, 5000, 30_000, 120_000] },
        async ({ key }) => {
          await new Promise((r) => setTimeout(r, 20));
          charges.set(key!, (charges.get(key!) ?? 0) + 1);
        },
      );
      const started = performance.now();
      for (let i = 0; i < 50; i++) {
        fx.publish({ payment: i }, { messageId: `pay-${i}` });
        fx.publish({ payment: i }, { messageId: `pay-${i}` });
      }
      await waitFor('all 100 deliveries acked', () => acks(events).length >= 100, 45_000, 10);
      const elapsedMs = performance.now() - started;
      process.stderr.write(`[rabbitmq conflict wait] 100 deliveries settled in ${elapsedMs.toFixed(0)} ms\n`);
      expect(elapsedMs).toBeLessThan(3000);
      expect(charges.size).toBe(50);
      expect([...charges.values()].filter((n) => n !== 1)).toEqual([]);
      expect(acks(events).filter((e) => e.decision.reason === 'duplicate')).toHaveLength(50);
      expect(events.retryScheduled).toEqual([]);
    });
  },
);
