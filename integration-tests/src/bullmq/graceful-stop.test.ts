import { waitFor } from '../../support/net';
import { describeWithServices } from '../../support/service';
import { BullFixture } from './fixture';

jest.setTimeout(30_000);

const byPayment = {
  idempotencyKey: (job: { data: unknown }) => (job.data as { paymentId: string }).paymentId,
};

describeWithServices(['redis'], 'bullmq processor: worker.close() with handlers in flight', ({ redis }) => {
  const fx = BullFixture.forSuite(redis);

  it('lets running handlers finish and complete, sends a job waiting for a holder back to delayed, and a new worker finishes the rest once', async () => {
    const queue = fx.queue();
    const idempotency = fx.idempotency({ leaseMs: 5000 });
    const started: string[] = [];
    const handler = async ({ key }: { key: string | undefined }) => {
      started.push(key!);
      await new Promise((r) => setTimeout(r, 800));
      await fx.effect(key!);
      return key;
    };
    const first = fx.worker(queue, idempotency, { ...byPayment, maxConflictDelayMs: 300 }, handler, {
      concurrency: 4,
    });
    const jobs = [
      { id: 'a', paymentId: 'p-a' },
      { id: 'b', paymentId: 'p-b' },
      { id: 'c', paymentId: 'p-c' },
      { id: 'a-again', paymentId: 'p-a' },
      { id: 'd', paymentId: 'p-d' },
      { id: 'e', paymentId: 'p-e' },
    ];
    await queue.addBulk(
      jobs.map(({ id, paymentId }) => ({ name: 'charge', data: { paymentId }, opts: { jobId: id } })),
    );
    await waitFor('three handlers running', () => started.length === 3);
    await waitFor(
      'the duplicate waiting for its holder',
      async () => (await fx.job(queue, 'a-again')).processedOn !== undefined,
    );

    await first.worker.close();
    // The handlers in flight ran to their end, and their jobs completed.
    expect(await fx.effects()).toEqual({ 'p-a': 1, 'p-b': 1, 'p-c': 1 });
    expect(await fx.states(queue, ['a', 'b', 'c'])).toEqual(['completed', 'completed', 'completed']);
    expect(await (await fx.job(queue, 'a-again')).getState()).toBe('delayed');
    expect(first.events.settled.find((e) => e.source.jobId === 'a-again')?.decision).toMatchObject({
      action: 'delay',
      reason: 'conflict',
    });
    expect((await queue.getJobCounts('failed')).failed).toBe(0);

    const second = fx.worker(queue, idempotency, { ...byPayment, maxConflictDelayMs: 200 }, handler, {
      concurrency: 4,
    });
    await waitFor(
      'every job completed',
      async () => (await queue.getJobCounts('completed')).completed === jobs.length,
      15_000,
    );
    expect(await fx.effects()).toEqual({ 'p-a': 1, 'p-b': 1, 'p-c': 1, 'p-d': 1, 'p-e': 1 });
    expect(second.events.settled.find((e) => e.source.jobId === 'a-again')?.decision).toEqual({
      action: 'complete',
      reason: 'duplicate',
    });
    expect((await fx.job(queue, 'a-again')).returnvalue).toBe('p-a');
  });
});
