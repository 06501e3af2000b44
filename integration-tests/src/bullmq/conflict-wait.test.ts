import type { BullMqIdempotencyOptions } from '@idempotent-consumer/bullmq';
import { waitFor } from '../../support/net';
import { describeWithServices } from '../../support/service';
import { BullFixture } from './fixture';

jest.setTimeout(30_000);

/** The key of a payment job: its `paymentId`, so that two jobs can carry the same one. */
const byPayment = {
  idempotencyKey: (job: { data: unknown }) => (job.data as { paymentId: string }).paymentId,
};

describeWithServices(
  ['redis'],
  'bullmq processor: a duplicate delivered while its original runs',
  ({ redis }) => {
    const fx = BullFixture.forSuite(redis);

    /**
     * A worker of concurrency 2 whose handler holds until `release()`, and job `first` of `paymentId` in
     * that handler; then job `second` of the same payment is added.
     */
    async function duplicateDuringOriginal(paymentId: string, options: BullMqIdempotencyOptions = {}) {
      const queue = fx.queue();
      let release!: () => void;
      const holding = new Promise<void>((resolve) => {
        release = resolve;
      });
      const state = { runs: 0, added: 0 };
      const { events } = fx.worker(
        queue,
        fx.idempotency({ leaseMs: 20_000 }),
        { ...byPayment, ...options },
        async ({ key }) => {
          state.runs += 1;
          await holding;
          await fx.effect(key!);
          return { charged: key };
        },
        { concurrency: 2 },
      );
      await queue.add('charge', { paymentId }, { jobId: 'first' });
      await waitFor('the original in its handler', () => state.runs === 1);
      state.added = Date.now();
      await queue.add('charge', { paymentId }, { jobId: 'second' });
      const bothCompleted = () =>
        waitFor(
          'both completed',
          async () => (await fx.states(queue, ['first', 'second'])).every((s) => s === 'completed'),
          10_000,
          20,
        );
      return { queue, events, release, state, bothCompleted };
    }

    it('waits for the holder and settles as a DUPLICATE within 3 s, not after the 20 s lease', async () => {
      await fx.resetEffects();
      const { queue, events, release, state, bothCompleted } = await duplicateDuringOriginal('p-1');
      // The duplicate meets the running claim; the original completes a little later.
      setTimeout(release, 500);
      await bothCompleted();
      const second = await fx.job(queue, 'second');
      expect(second.finishedOn! - state.added).toBeLessThan(3000);
      expect(second.returnvalue).toEqual({ charged: 'p-1' });
      expect(second.attemptsMade).toBe(1);
      expect(state.runs).toBe(1);
      expect(await fx.effects()).toEqual({ 'p-1': 1 });
      expect(events.settled.map((e) => e.decision)).toEqual([
        { action: 'complete', reason: 'completed' },
        { action: 'complete', reason: 'duplicate' },
      ]);
      expect(events.retryScheduled).toEqual([]);
    });

    it('without a wait, the duplicate is moved to delayed for maxConflictDelayMs (no attempt spent), then completes as a DUPLICATE', async () => {
      const { queue, events, release, state, bothCompleted } = await duplicateDuringOriginal('p-2', {
        conflictWaitMs: 0,
        maxConflictDelayMs: 300,
      });
      await waitFor('the duplicate delayed', () => events.retryScheduled.length > 0);
      expect(await (await fx.job(queue, 'second')).getState()).toBe('delayed');
      release();
      await bothCompleted();
      const second = await fx.job(queue, 'second');
      expect(second.returnvalue).toEqual({ charged: 'p-2' });
      expect(second.attemptsMade).toBe(1); // the delay spent none of BullMQ's attempts
      expect(events.retryScheduled[0]).toMatchObject({ reason: 'conflict', delayMs: 300, key: 'p-2' });
      expect(events.settled.map((e) => e.decision.action)).toContain('delay');
      expect(state.runs).toBe(1);
    });
  },
);
