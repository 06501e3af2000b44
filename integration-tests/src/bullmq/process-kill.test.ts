import { join } from 'node:path';
import type { BullMqHandlerContext } from '@idempotent-consumer/bullmq';
import { waitFor } from '../../support/net';
import { describeWithServices } from '../../support/service';
import { startWorker, type WorkerProcess } from '../../support/worker-process';
import { BullFixture } from './fixture';

jest.setTimeout(90_000);

const WORKER = join(__dirname, '../../workers/bullmq-worker.ts');
const TOTAL = 40;
const LEASE_MS = 2000;

type Mode = 'hang-before-effect' | 'hang-after-effect' | 'freeze-after-complete';

/** The JSON lines a worker process printed. */
function said(worker: WorkerProcess): Record<string, unknown>[] {
  return worker
    .stdout()
    .split('\n')
    .filter((line) => line.startsWith('{'))
    .map((line) => JSON.parse(line) as Record<string, unknown>);
}

describeWithServices(['redis'], 'bullmq processor: a worker process killed with SIGKILL', ({ redis }) => {
  const fx = BullFixture.forSuite(redis);

  /**
   * 40 jobs; a worker process takes the first, stops in it as `mode` says and is killed there while a
   * worker of this process runs the rest. BullMQ finds the killed job stalled and runs it again here.
   */
  async function killMidRun(mode: Mode) {
    const queue = fx.queue();
    await fx.resetEffects();
    const seen: Pick<BullMqHandlerContext, 'key' | 'outcome' | 'attempt' | 'fencingToken'>[] = [];
    const child = startWorker(WORKER, {
      MODE: mode,
      REDIS_URL: redis,
      BULL_PREFIX: fx.prefix,
      QUEUE: queue.name,
      KEY_PREFIX: fx.keyPrefix,
      EFFECTS_KEY: fx.effectsKey,
      LEASE_MS: String(LEASE_MS),
    });
    try {
      await waitFor(
        `the worker process ready (${child.stderr().slice(0, 300)})`,
        () => said(child).some((e) => e.event === 'ready'),
        40_000,
      );
      const ids = Array.from({ length: TOTAL }, (_, i) => `pay-${i}`);
      await queue.addBulk(ids.map((id) => ({ name: 'charge', data: { id }, opts: { jobId: id } })));
      const stop = mode === 'freeze-after-complete' ? 'completed' : 'in-handler';
      await waitFor(`the worker process ${stop}`, () => said(child).some((e) => e.event === stop), 20_000);
      const { worker, events } = fx.worker(
        queue,
        fx.idempotency({ leaseMs: LEASE_MS }),
        {},
        async ({ key, outcome, attempt, fencingToken }) => {
          seen.push({ key, outcome, attempt, fencingToken });
          await fx.effect(key!);
          return { charged: key };
        },
        { concurrency: 4 },
      );
      child.child.kill('SIGKILL');
      expect((await child.exited).signal).toBe('SIGKILL');
      const victim = said(child).find((e) => e.event === stop)!.key as string;
      await waitFor(
        `all ${TOTAL} jobs completed`,
        async () => (await queue.getJobCounts('completed')).completed === TOTAL,
        40_000,
        100,
      );
      const counts = await queue.getJobCounts('failed', 'wait', 'active', 'delayed');
      expect(counts).toEqual({ failed: 0, wait: 0, active: 0, delayed: 0 });
      await worker.close();
      return { queue, victim, seen, events, child, effects: await fx.effects(), ids };
    } finally {
      child.child.kill('SIGKILL');
    }
  }

  it('killed before its side effect: the stalled job is run again as ACQUIRED_STALE; every job charged once', async () => {
    const { victim, seen, effects, ids } = await killMidRun('hang-before-effect');
    expect(Object.keys(effects).sort()).toEqual([...ids].sort());
    expect(Object.values(effects).every((n) => n === 1)).toBe(true);
    expect(seen.filter((s) => s.key === victim)).toEqual([
      expect.objectContaining({ outcome: 'ACQUIRED_STALE', attempt: 2 }),
    ]);
  });

  it('killed after its side effect, before COMPLETED: that job alone is charged twice (the documented window)', async () => {
    const { victim, seen, effects, ids, child } = await killMidRun('hang-after-effect');
    expect(Object.keys(effects).sort()).toEqual([...ids].sort());
    expect(Object.entries(effects).filter(([, n]) => n !== 1)).toEqual([[victim, 2]]);
    const rerun = seen.find((s) => s.key === victim)!;
    expect(rerun.outcome).toBe('ACQUIRED_STALE');
    // The re-run's fencing token is above the dead holder's: a downstream write can refuse the stale one.
    const killed = said(child).find((e) => e.event === 'in-handler')!.fencingToken as number;
    expect(rerun.fencingToken).toBeGreaterThan(killed);
  });

  it('killed after COMPLETED, before BullMQ completed the job: the stalled job completes as a DUPLICATE with the stored result', async () => {
    const { queue, victim, seen, effects, events } = await killMidRun('freeze-after-complete');
    expect(Object.values(effects).every((n) => n === 1)).toBe(true);
    expect(seen.some((s) => s.key === victim)).toBe(false);
    expect(events.settled.find((e) => e.key === victim)?.decision).toEqual({
      action: 'complete',
      reason: 'duplicate',
    });
    expect((await fx.job(queue, victim)).returnvalue).toEqual({ charged: victim });
  });
});
