import { type ChildProcess, fork } from 'node:child_process';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { SingleBar } from 'cli-progress';
import type { Redis } from 'ioredis';
import type { DemoBroker, DemoCounters, DemoMode } from './broker';
import type { FromConsumer, ToConsumer } from './ipc';
import { zeroCounters } from './ipc';
import { countCharged, readLedger } from './ledger';
import type { PaymentStream } from './messages';

/** Settings of one scenario run. */
export interface ScenarioOptions {
  readonly brokerName: string;
  readonly mode: DemoMode;
  readonly consumers: number;
  readonly leaseMs: number;
  readonly failureRate: number;
  /** Give up waiting for the last payments after this long, in milliseconds. */
  readonly timeoutMs: number;
  /** Declare the run finished once every payment is charged and nothing changed for this long, in ms. */
  readonly quietMs: number;
  readonly redisUrl: string;
}

/** What one scenario run measured. */
export interface ScenarioReport extends DemoCounters {
  readonly mode: DemoMode;
  readonly published: number;
  readonly duplicatesInjected: number;
  readonly chargesRecorded: number;
  readonly chargesExpected: number;
  readonly doubleCharges: number;
  readonly lost: number;
  readonly consumersKilled: number;
  readonly seconds: number;
}

interface Worker {
  readonly child: ChildProcess;
  counters: DemoCounters;
  ready: Promise<void>;
}

/** Called with progress while a scenario runs. */
export interface ScenarioProgress {
  start(total: number, phase: string): SingleBar | undefined;
  log(line: string): void;
}

/**
 * Runs the payments scenario once: forks the consumer processes, publishes the stream, SIGKILLs one
 * consumer in the middle of a handler (and starts a replacement), waits until every payment is charged
 * and the consumers are quiet, then reads the ledger.
 */
export async function runScenario(
  broker: DemoBroker,
  redis: Redis,
  stream: PaymentStream,
  options: ScenarioOptions,
  progress: ScenarioProgress,
): Promise<ScenarioReport> {
  const started = Date.now();
  const runId = `${options.mode}-${started}-${process.pid}`;
  const config = await broker.setup(runId, options.mode);
  const workers: Worker[] = [];
  const finished: DemoCounters[] = [];
  const spawnWorker = (): Worker => {
    const child = fork(join(__dirname, 'consumer-process.js'), [], {
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    let resolveReady: () => void = () => {};
    let rejectReady: (e: Error) => void = () => {};
    const worker: Worker = {
      child,
      counters: zeroCounters(),
      ready: new Promise<void>((resolve, reject) => {
        resolveReady = resolve;
        rejectReady = reject;
      }),
    };
    child.on('message', (message: FromConsumer) => {
      if (message.type === 'ready') resolveReady();
      else if (message.type === 'stats' || message.type === 'stopped') worker.counters = message.counters;
      else if (message.type === 'error')
        rejectReady(new Error(`A consumer process failed: ${message.message}`));
    });
    child.once('exit', (code, signal) =>
      rejectReady(new Error(`A consumer process exited (${code ?? signal})`)),
    );
    const init: ToConsumer = {
      type: 'init',
      broker: options.brokerName,
      mode: options.mode,
      runId,
      config,
      redisUrl: options.redisUrl,
      leaseMs: options.leaseMs,
      failureRate: options.failureRate,
    };
    child.send(init);
    workers.push(worker);
    return worker;
  };

  try {
    for (let i = 0; i < options.consumers; i++) spawnWorker();
    await Promise.all(workers.map((w) => w.ready));

    // Publish in chunks; arm one consumer to be killed mid-handler once a third is out.
    const victim = workers[0]!;
    let killed = 0;
    const killedInHandler = new Promise<string>((resolve) => {
      victim.child.on('message', (message: FromConsumer) => {
        if (message.type !== 'in-handler') return;
        victim.counters = message.counters; // its last word: the counters up to the kill
        resolve(message.paymentId);
      });
    });
    const bar = progress.start(stream.messages.length, `${options.mode}: publishing`);
    const chunk = 100;
    for (let i = 0; i < stream.messages.length; i += chunk) {
      await broker.publish(stream.messages.slice(i, i + chunk));
      bar?.update(Math.min(stream.messages.length, i + chunk));
      if (i <= stream.messages.length / 3 && i + chunk > stream.messages.length / 3) {
        victim.child.send({ type: 'arm-kill' } satisfies ToConsumer);
      }
    }
    bar?.stop();
    const paymentId = await Promise.race([killedInHandler, sleep(30_000).then(() => undefined)]);
    if (paymentId) {
      finished.push(victim.counters);
      workers.splice(workers.indexOf(victim), 1);
      victim.child.kill('SIGKILL');
      killed++;
      progress.log(
        `${options.mode}: killed a consumer (SIGKILL) in the middle of the handler of ${paymentId}`,
      );
      await spawnWorker().ready;
    } else {
      progress.log(`${options.mode}: the armed consumer never entered a handler; no consumer was killed`);
    }

    // Wait until every payment is charged and the counters stop moving.
    const charging = progress.start(stream.payments, `${options.mode}: charging`);
    const deadline = started + options.timeoutMs;
    let lastSnapshot = '';
    let quietSince = Date.now();
    for (;;) {
      const charged = await countCharged(redis, runId);
      charging?.update(charged);
      const snapshot = JSON.stringify([charged, workers.map((w) => w.counters)]);
      if (snapshot !== lastSnapshot) {
        lastSnapshot = snapshot;
        quietSince = Date.now();
      }
      if (charged >= stream.payments && Date.now() - quietSince >= options.quietMs) break;
      if (Date.now() > deadline) {
        progress.log(
          `${options.mode}: timed out after ${options.timeoutMs} ms waiting for the last payments`,
        );
        break;
      }
      await sleep(100);
    }
    charging?.stop();

    for (const w of workers) {
      const stopped = new Promise<void>((resolve) => w.child.once('exit', () => resolve()));
      w.child.send({ type: 'stop' } satisfies ToConsumer);
      await Promise.race([stopped, sleep(10_000).then(() => w.child.kill('SIGKILL'))]);
      finished.push(w.counters);
    }
    workers.length = 0;

    const ledger = await readLedger(redis, runId);
    const sum = (k: keyof DemoCounters) => finished.reduce((a, c) => a + c[k], 0);
    return {
      mode: options.mode,
      published: stream.messages.length,
      duplicatesInjected: stream.duplicates,
      deliveries: sum('deliveries'),
      handlerRuns: sum('handlerRuns'),
      duplicatesSkipped: sum('duplicatesSkipped'),
      conflicts: sum('conflicts'),
      retries: sum('retries'),
      deadLettered: sum('deadLettered'),
      chargesRecorded: ledger.chargesRecorded,
      chargesExpected: stream.payments,
      doubleCharges: ledger.doubleCharges,
      lost: stream.payments - ledger.paymentsCharged,
      consumersKilled: killed,
      seconds: (Date.now() - started) / 1000,
    };
  } finally {
    for (const w of workers) w.child.kill('SIGKILL');
    await broker.teardown().catch(() => {});
  }
}
