import { join } from 'node:path';
import { waitFor } from '../../support/net';
import { describeWithServices } from '../../support/service';
import { startWorker, type WorkerProcess } from '../../support/worker-process';
import { acks, NatsFixture } from './fixture';

const WORKER = join(__dirname, '../../workers/nats-consumer.ts');

jest.setTimeout(90_000);

describeWithServices(['nats', 'redis'], 'nats adapter: a consumer process killed with SIGKILL', (urls) => {
  const workers: WorkerProcess[] = [];
  // Declared before the fixture's hooks, so the workers are dead before it cleans up.
  afterEach(async () => {
    for (const w of workers.splice(0)) {
      w.child.kill('SIGKILL');
      await w.exited;
    }
  });
  const fx = NatsFixture.eachTest(urls);
  const LEASE_MS = 1500;

  function start(mode: 'hang' | 'run', handlerMs = 0): WorkerProcess {
    const worker = startWorker(WORKER, {
      NATS_URL: urls.nats,
      REDIS_URL: urls.redis,
      STREAM: fx.stream,
      DURABLE: fx.durable,
      DEAD_SUBJECT: fx.deadLetterSubject,
      KEY_PREFIX: fx.prefix,
      LEDGER: fx.effectsKey,
      LEASE_MS: String(LEASE_MS),
      MODE: mode,
      HANDLER_MS: String(handlerMs),
    });
    workers.push(worker);
    return worker;
  }
  const lines = (worker: WorkerProcess, word: string) =>
    worker
      .stdout()
      .split('\n')
      .filter((line) => line.startsWith(`${word} `));

  it('killed mid-handler: JetStream delivers it again after ack_wait, a new consumer runs it as ACQUIRED_STALE, once', async () => {
    const worker = start('hang');
    await waitFor(
      `the worker ready (${worker.stderr().slice(0, 300)})`,
      () => worker.stdout().includes('ready'),
      30_000,
    );
    await fx.publish('kill-1');
    await waitFor('the worker in its handler', () => lines(worker, 'in-handler').length === 1, 10_000);
    worker.child.kill('SIGKILL');
    expect((await worker.exited).signal).toBe('SIGKILL');
    const killedToken = Number(lines(worker, 'in-handler')[0]!.split(' ')[2]);

    const seen: { outcome: string; attempt: number; fencingToken: number; deliveryCount: number }[] = [];
    const { events } = await fx.consumer(
      fx.idempotency({ leaseMs: LEASE_MS }),
      {},
      async ({ key, outcome, attempt, fencingToken, message }) => {
        seen.push({ outcome, attempt, fencingToken, deliveryCount: message.info.deliveryCount });
        await fx.effect(key!);
      },
    );
    await waitFor('the new consumer acked it', () => acks(events).length === 1, 15_000);
    expect(seen).toEqual([
      { outcome: 'ACQUIRED_STALE', attempt: 2, fencingToken: expect.any(Number), deliveryCount: 2 },
    ]);
    expect(seen[0]!.fencingToken).toBeGreaterThan(killedToken);
    expect(await fx.effects()).toEqual({ 'kill-1': 1 });
  });

  it('killed mid-run with 60 payments: none lost, and a payment charged twice only in the window between its charge and its COMPLETED write', async () => {
    const total = 60;
    for (let i = 0; i < total; i++) await fx.publish(`pay-${i}`);
    const worker = start('run', 20);
    await waitFor(
      `a third completed (${worker.stderr().slice(0, 300)})`,
      () => lines(worker, 'completed').length >= total / 3,
      30_000,
    );
    worker.child.kill('SIGKILL');
    await worker.exited;
    const completedByWorker = new Set(lines(worker, 'completed').map((line) => line.split(' ')[1]));
    const ranAgain: string[] = [];
    await fx.consumer(fx.idempotency({ leaseMs: LEASE_MS }), {}, async ({ key }) => {
      ranAgain.push(key!);
      await fx.effect(key!);
    });
    await waitFor(
      'every payment charged',
      async () => Object.keys(await fx.effects()).length === total,
      30_000,
    );
    await waitFor(
      'nothing pending',
      async () => {
        const { pending, ackPending } = await fx.pending();
        return pending === 0 && ackPending === 0;
      },
      30_000,
    );
    const effects = await fx.effects();
    const doubles = Object.keys(effects).filter((key) => effects[key]! > 1);
    process.stderr.write(
      `[nats kill] ${completedByWorker.size} completed before the kill, ${doubles.length} charged twice (${doubles.join(', ') || 'none'})\n`,
    );
    expect(Object.keys(effects)).toHaveLength(total);
    expect(Object.values(effects).filter((n) => n > 2)).toEqual([]);
    // A payment the killed worker had recorded COMPLETED never ran again; a double is one in the window.
    expect(ranAgain.filter((key) => completedByWorker.has(key))).toEqual([]);
    expect(doubles.filter((key) => completedByWorker.has(key))).toEqual([]);
    expect(doubles.length).toBeLessThanOrEqual(4); // at most the worker's concurrency was in that window
  });
});
