import { readDeadLetter } from '@idempotent-consumer/bullmq';
import { DEAD_LETTER_FIELDS } from '@idempotent-consumer/core/kit';
import { waitFor } from '../../support/net';
import { describeWithServices } from '../../support/service';
import { BullFixture } from './fixture';

jest.setTimeout(30_000);

const F = DEAD_LETTER_FIELDS;

describeWithServices(['redis'], 'bullmq processor: outcomes on a real queue', ({ redis }) => {
  const fx = BullFixture.forSuite(redis);

  it('completes a job once; the same jobId added again returns the stored result without running', async () => {
    const queue = fx.queue();
    const runs: string[] = [];
    fx.worker(queue, fx.idempotency(), {}, async ({ key, job, outcome }) => {
      runs.push(`${key} ${outcome}`);
      await fx.effect(key!);
      return { charged: (job.data as { cents: number }).cents };
    });
    await queue.add('charge', { cents: 500 }, { jobId: 'pay-1', removeOnComplete: true });
    await waitFor('pay-1 completed and removed', async () => (await queue.getJob('pay-1')) === undefined);
    // The producer sends it again (BullMQ takes the same jobId once the first was removed).
    await queue.add('charge', { cents: 500 }, { jobId: 'pay-1' });
    await waitFor(
      'the second pay-1 completed',
      async () => (await queue.getJob('pay-1'))?.finishedOn !== undefined,
    );
    const job = await fx.job(queue, 'pay-1');
    expect(await job.getState()).toBe('completed');
    expect(job.returnvalue).toEqual({ charged: 500 });
    expect(runs).toEqual(['pay-1 ACQUIRED']);
    expect((await fx.effects())['pay-1']).toBe(1);
  });

  it('poison: a job whose key cannot be read fails as invalid-key without running; the queue goes on', async () => {
    const queue = fx.queue();
    const runs: string[] = [];
    const { events } = fx.worker(
      queue,
      fx.idempotency(),
      {
        idempotencyKey: (job) => {
          const id = (job.data as { paymentId?: unknown }).paymentId;
          if (typeof id !== 'string') throw new TypeError('paymentId is not a string');
          return id;
        },
      },
      ({ key }) => {
        runs.push(key!);
      },
    );
    await queue.add('charge', { paymentId: 42 }, { jobId: 'bad-1', attempts: 3 });
    await queue.add('charge', { paymentId: 'p-2' }, { jobId: 'good-2' });
    await waitFor('both jobs finished', async () => {
      const states = await fx.states(queue, ['bad-1', 'good-2']);
      return states[0] === 'failed' && states[1] === 'completed';
    });
    const bad = await fx.job(queue, 'bad-1');
    expect(bad.attemptsMade).toBe(1); // UnrecoverableError: BullMQ does not try the other attempts
    expect(readDeadLetter(bad.failedReason)).toMatchObject({
      [F.reason]: 'invalid-key',
      [F.outcome]: 'NONE',
      [F.error]: expect.stringContaining('paymentId is not a string'),
    });
    expect(runs).toEqual(['p-2']);
    expect(events.invalidKey).toHaveLength(1);
  });

  it("poison: an always-throwing handler runs maxAttempts times under BullMQ's attempts, then fails the job with the dead-letter fields", async () => {
    const queue = fx.queue();
    const idempotency = fx.idempotency({ maxAttempts: 3 });
    let runs = 0;
    const { events } = fx.worker(queue, idempotency, {}, () => {
      runs += 1;
      throw new Error('card declined');
    });
    await queue.add('charge', { cents: 1 }, { jobId: 'poison-1', attempts: 10, backoff: 20 });
    await waitFor('poison-1 failed', async () => (await fx.states(queue, ['poison-1']))[0] === 'failed');
    const job = await fx.job(queue, 'poison-1');
    expect(runs).toBe(3);
    expect(job.attemptsMade).toBe(3);
    expect(readDeadLetter(job.failedReason)).toEqual({
      [F.reason]: 'attempts-exhausted',
      [F.outcome]: 'ACQUIRED',
      [F.error]: 'Error: card declined',
      [F.attempt]: '3',
      [F.scope]: queue.name,
      [F.key]: 'poison-1',
    });
    expect(await idempotency.store.get({ scope: queue.name, key: 'poison-1' })).toMatchObject({
      state: 'FAILED',
      deadLettered: true,
    });
    expect(events.retryScheduled.map((e) => e.reason)).toEqual(['handler-error', 'handler-error']);
    expect(events.deadLettered).toEqual([expect.objectContaining({ reason: 'attempts-exhausted' })]);
  });

  it("a handler error on BullMQ's last attempt fails the job with the handler's error; the record stays released", async () => {
    const queue = fx.queue();
    const idempotency = fx.idempotency({ maxAttempts: 5 });
    fx.worker(queue, idempotency, {}, () => {
      throw new Error('gateway timeout');
    });
    await queue.add('charge', {}, { jobId: 'once-1' });
    await waitFor('once-1 failed', async () => (await fx.states(queue, ['once-1']))[0] === 'failed');
    const job = await fx.job(queue, 'once-1');
    expect(job.failedReason).toBe('gateway timeout');
    expect(await idempotency.store.get({ scope: queue.name, key: 'once-1' })).toMatchObject({
      state: 'RELEASED',
      attempt: 1,
    });
  });

  it('a job without a jobId fails as missing-key; the same key with other data as payload-mismatch', async () => {
    const queue = fx.queue();
    let runs = 0;
    fx.worker(queue, fx.idempotency(), {}, () => {
      runs += 1;
    });
    const counted = await queue.add('charge', { cents: 1 });
    await queue.add('charge', { cents: 1 }, { jobId: 'p-1', removeOnComplete: true });
    await waitFor('p-1 done', async () => (await queue.getJob('p-1')) === undefined);
    await queue.add('charge', { cents: 2 }, { jobId: 'p-1' });
    const ids = [counted.id!, 'p-1'];
    await waitFor('both failed', async () => (await fx.states(queue, ids)).every((s) => s === 'failed'));
    const [missing, mismatch] = await Promise.all(ids.map((id) => fx.job(queue, id)));
    expect(readDeadLetter(missing!.failedReason)?.[F.reason]).toBe('missing-key');
    expect(readDeadLetter(mismatch!.failedReason)).toMatchObject({
      [F.reason]: 'payload-mismatch',
      [F.outcome]: 'PAYLOAD_MISMATCH',
    });
    expect(runs).toBe(1);
  });
});
