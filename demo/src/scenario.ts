import { type ChildProcess, fork } from 'node:child_process';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { SingleBar } from 'cli-progress';
import type { Redis } from 'ioredis';
import type { DemoBroker, DemoCounters, DemoMode } from './broker';
import type { FromConsumer, ToConsumer } from './ipc';
import { zeroCounters } from './ipc';
import type { PaymentStream } from './messages';
import { openLedgerReader } from './side-effect';
import type { SideEffectKind } from './side-effect-contract';

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
  /** Where charges are written (`--side-effect`). */
  readonly sideEffect: SideEffectKind;
  /** PostgreSQL for `--side-effect postgres`. */
  readonly databaseUrl: string;
}

/** What one scenario run measured. */
export interface ScenarioReport extends DemoCounters {
  readonly mode: DemoMode;
  readonly published: number;
  readonly duplicatesInjected: number;
  readonly chargesRecorded: number;
  readonly chargesExpected: number;
  readonly doubleCharges: number;
  readonly doubleChargedPayments: number;
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
 * consumer in the middle of a handler (whichever runs the first handler after a third of the stream is
 * published; and starts a replacement), waits until every payment is charged
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
  const ledger = await openLedgerReader(
    { kind: options.sideEffect, runId, sdk: options.mode === 'sdk', databaseUrl: options.databaseUrl },
    redis,
  );
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
      sideEffect: options.sideEffect,
      databaseUrl: options.databaseUrl,
    };
    child.send(init);
    workers.push(worker);
    return worker;
  };

  try {
    for (let i = 0; i < options.consumers; i++) spawnWorker();
    await Promise.all(workers.map((w) => w.ready));

    // Publish in chunks; once a third is out, arm every consumer: the first handler run after that, in
    // whichever process, becomes the victim (one wins, through Redis), so exactly one consumer is killed.
    let killed = 0;
    let resolveVictim: (v: { worker: Worker; paymentId: string; afterCommit: boolean }) => void = () => {};
    const victimFound = new Promise<{ worker: Worker; paymentId: string; afterCommit: boolean }>((r) => {
      resolveVictim = r;
    });
    const watchForVictim = (worker: Worker) =>
      worker.child.on('message', (message: FromConsumer) => {
        if (message.type !== 'in-handler') return;
        worker.counters = message.counters; // its last word: the counters up to the kill
        resolveVictim({ worker, paymentId: message.paymentId, afterCommit: message.afterCommit });
      });
    workers.forEach(watchForVictim);
    const bar = progress.start(stream.messages.length, `${options.mode}: publishing`);
    const chunk = 100;
    const armAt = Math.floor(stream.messages.length / 3);
    for (let i = 0; i < stream.messages.length; i += chunk) {
      if (i <= armAt && armAt < i + chunk) {
        for (const w of workers) w.child.send({ type: 'arm-kill' } satisfies ToConsumer);
      }
      await broker.publish(stream.messages.slice(i, i + chunk));
      bar?.update(Math.min(stream.messages.length, i + chunk));
    }
    bar?.stop();
    const giveUp = new AbortController();
    const found = await Promise.race([
      victimFound,
      sleep(options.timeoutMs, undefined, { signal: giveUp.signal }).then(
        () => undefined,
        () => undefined,
      ),
    ]);
    giveUp.abort();
    if (found) {
      const { worker: victim, paymentId, afterCommit } = found;
      finished.push(victim.counters);
      workers.splice(workers.indexOf(victim), 1);
      victim.child.kill('SIGKILL');
      killed++;
      progress.log(
        `${options.mode}: SIGKILL to a consumer mid-handler (${paymentId})` +
          (afterCommit ? ', after its charge committed and before COMPLETED' : ''),
      );
      await spawnWorker().ready;
    } else {
      progress.log(`${options.mode}: no handler ran within ${options.timeoutMs} ms; no consumer was killed`);
    }

    // Wait until every payment is charged and the counters stop moving.
    const charging = progress.start(stream.payments, `${options.mode}: charging`);
    const deadline = started + options.timeoutMs;
    let lastSnapshot = '';
    let quietSince = Date.now();
    for (;;) {
      const charged = await ledger.countCharged();
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

    const totals = await ledger.totals();
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
      gatewayTimeouts: sum('gatewayTimeouts'),
      deadLettered: sum('deadLettered'),
      chargesRecorded: totals.chargesRecorded,
      chargesExpected: stream.payments,
      doubleCharges: totals.doubleCharges,
      doubleChargedPayments: totals.doubleChargedPayments,
      lost: stream.payments - totals.paymentsCharged,
      consumersKilled: killed,
      seconds: (Date.now() - started) / 1000,
    };
  } finally {
    for (const w of workers) w.child.kill('SIGKILL');
    await broker.teardown().catch(() => {});
    await ledger.drop().catch(() => {});
  }
}
