import { type ChildProcess, spawn } from 'node:child_process';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import type { RabbitMqHandlerContext } from '@idempotent-consumer/rabbitmq';
import { waitFor } from '../../support/net';
import { describeWithServices } from '../../support/service';
import { acks, RabbitFixture } from './fixture';

const ROOT = join(__dirname, '..', '..', '..');
const WORKER = join(ROOT, 'integration-tests', 'workers', 'rabbitmq-consumer.ts');

/** A consumer process and the events it printed. */
class Worker {
  readonly events: Record<string, unknown>[] = [];
  readonly exited: Promise<NodeJS.Signals | number | null>;

  constructor(readonly child: ChildProcess) {
    createInterface({ input: child.stdout! }).on('line', (line) => {
      try {
        this.events.push(JSON.parse(line) as Record<string, unknown>);
      } catch {
        // Not one of ours.
      }
    });
    this.exited = new Promise((resolve) => child.once('exit', (code, signal) => resolve(signal ?? code)));
  }

  /** Waits until the process printed `event` (a long deadline: tsx compiles on start). */
  until(event: string): Promise<void> {
    return waitFor(`the worker to print ${event}`, () => this.events.some((e) => e.event === event), 30_000);
  }
}

describeWithServices(
  ['rabbitmq', 'redis'],
  'rabbitmq adapter: a consumer process killed with SIGKILL',
  (urls) => {
    const workers: Worker[] = [];
    // Declared before the fixture's hooks, so the workers are dead before it cleans up.
    afterEach(async () => {
      for (const w of workers.splice(0)) {
        w.child.kill('SIGKILL');
        await w.exited;
      }
    });
    const fx = RabbitFixture.eachTest(urls);

    function startWorker(mode: 'hang-in-handler' | 'freeze-after-complete'): Worker {
      const child = spawn(process.execPath, ['--import', 'tsx', WORKER], {
        cwd: ROOT,
        stdio: ['ignore', 'pipe', 'inherit'],
        env: {
          ...process.env,
          MODE: mode,
          AMQP_URL: urls.rabbitmq,
          REDIS_URL: urls.redis,
          QUEUE: fx.queue,
          KEY_PREFIX: fx.prefix,
          EFFECTS_KEY: fx.effectsKey,
          LEASE_MS: '1000',
        },
      });
      const worker = new Worker(child);
      workers.push(worker);
      return worker;
    }

    async function kill(worker: Worker): Promise<void> {
      worker.child.kill('SIGKILL');
      expect(await worker.exited).toBe('SIGKILL');
    }

    it('killed mid-handler: the message is redelivered, reclaimed as ACQUIRED_STALE, side effect once', async () => {
      const worker = startWorker('hang-in-handler');
      await worker.until('ready');
      fx.publish({ amount: 100 }, { messageId: 'kill-1' });
      await worker.until('in-handler');
      await kill(worker);

      const seen: RabbitMqHandlerContext[] = [];
      const { events } = await fx.consumer(fx.idempotency({ leaseMs: 1000 }), {}, async (ctx) => {
        seen.push(ctx);
        await fx.effect(ctx.key!);
      });
      await waitFor('the second consumer to complete the message', () => acks(events).length === 1, 10_000);
      expect(seen).toHaveLength(1);
      expect(seen[0]).toMatchObject({
        key: 'kill-1',
        outcome: 'ACQUIRED_STALE',
        fencingToken: expect.any(Number), // greater than the dead holder's (tokens come from the server clock)
        attempt: 2,
      });
      expect(seen[0]!.message.fields.redelivered || events.retryScheduled.length > 0).toBe(true);
      // The dead holder's lease was still running: the message waited in a delay tier, it did not spin.
      expect(events.retryScheduled.every((e) => e.reason === 'conflict')).toBe(true);
      expect(events.retryScheduled.length).toBeLessThanOrEqual(2);
      expect(await fx.effects()).toEqual({ 'kill-1': '1' });
    }, 60_000);

    it('killed after COMPLETED was written but before the ack: the redelivery is a DUPLICATE', async () => {
      const worker = startWorker('freeze-after-complete');
      await worker.until('ready');
      fx.publish({ amount: 100 }, { messageId: 'kill-2' });
      await worker.until('completed');
      await kill(worker);

      let runs = 0;
      const { events } = await fx.consumer(fx.idempotency({ leaseMs: 1000 }), {}, () => {
        runs += 1;
      });
      await waitFor('the redelivery to be acked', () => acks(events).length === 1, 10_000);
      expect(runs).toBe(0);
      expect(acks(events)[0]).toMatchObject({
        decision: { reason: 'duplicate' },
        outcome: 'DUPLICATE',
        source: { redelivered: true },
      });
      expect(await fx.effects()).toEqual({ 'kill-2': '1' });
    }, 60_000);
  },
);
