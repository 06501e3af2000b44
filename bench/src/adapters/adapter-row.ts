import { performance } from 'node:perf_hooks';
import { type CpuMeter, type CpuPerMessage, type CpuReading, cpuPerMessage } from '../cpu-meter';

/**
 * Messages per second through one adapter, through the same broker client without the SDK, and through
 * that client sending the SDK's two scripts around the same handler itself (no SDK code).
 */
export interface AdapterRow {
  readonly broker: string;
  readonly setting: string;
  readonly messages: number;
  readonly bareMsgPerSecond: number;
  /**
   * The broker client's own loop with a bare ioredis client sending `lua/claim.lua` before the handler and
   * `lua/complete.lua` after it (EVALSHA, the body fingerprinted as the adapters' default, writes coalesced
   * as the store does; `BareScripts`), settling each
   * message only after its completion answered: the floor of any adapter that writes a claim before each
   * handler with these scripts on this Redis, broker and machine.
   */
  readonly scriptsMsgPerSecond: number;
  readonly sdkMsgPerSecond: number;
  /** sdk ÷ bare: the target is at least 2/3 (the SDK costs at most a third). */
  readonly ratio: number;
  /** scripts ÷ bare: what the scripts alone leave of the bare throughput (about the ceiling of `ratio`). */
  readonly scriptsRatio: number;
  /** sdk ÷ scripts: what the SDK's own code (adapter, runner, store) costs beyond its scripts. */
  readonly sdkOverScripts: number;
  /**
   * CPU time per message (µs) from the first settled message to the last, bare and with the SDK, of this
   * Node process, the Redis server and the broker (when it runs on this machine): where the SDK's cost goes
   * when the broker, Redis and Node share the cores ({@link CpuMeter}).
   */
  readonly bareCpu: CpuPerMessage;
  readonly scriptsCpu: CpuPerMessage;
  readonly sdkCpu: CpuPerMessage;
}

/** How long `total` messages took to settle, and the CPU time per message meanwhile. */
export interface Settled {
  readonly seconds: number;
  readonly cpu: CpuPerMessage;
}

/**
 * Counts settled messages and resolves when `total` have settled; the clock and `meter` start at the first
 * one (so a consumer group's join or a first long poll is not counted).
 */
export function settleCounter(total: number, meter: CpuMeter, timeoutMs = 120_000) {
  let count = 0;
  let first = 0;
  let firstCpu: Promise<CpuReading> | undefined;
  let resolve!: (settled: Settled) => void;
  let reject!: (error: Error) => void;
  const done = new Promise<Settled>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  const timer = setTimeout(
    () =>
      reject(new Error(`only ${count} of ${total} messages settled (and measured) within ${timeoutMs} ms`)),
    timeoutMs,
  );
  timer.unref();
  done.catch(() => {}); // a caller that gave up early must not crash the run with an unhandled rejection
  return {
    settled(n = 1): void {
      if (count === 0) {
        first = performance.now();
        firstCpu = meter.read();
        firstCpu.catch(() => {}); // reported through `done` below
      }
      const before = count;
      count += n;
      if (before < total && count >= total) {
        const seconds = (performance.now() - first) / 1000;
        // The timer stays armed until the readings are in: a Redis that stops answering INFO fails the row.
        Promise.all([firstCpu!, meter.read()]).then(
          ([start, end]) => {
            clearTimeout(timer);
            resolve({ seconds, cpu: cpuPerMessage(start, end, total) });
          },
          (error: Error) => {
            clearTimeout(timer);
            reject(error);
          },
        );
      }
    },
    /** Ends the pass with `error` (a message it could not process): `done` rejects. */
    fail(error: Error): void {
      clearTimeout(timer);
      reject(error);
    },
    /** Seconds from the first settled message to the last, and the CPU time meanwhile. */
    done,
  };
}

/** The row of three measured passes of `messages` messages each. */
export function row(
  broker: string,
  setting: string,
  messages: number,
  passes: { readonly bare: Settled; readonly scripts: Settled; readonly sdk: Settled },
): AdapterRow {
  const bare = messages / passes.bare.seconds;
  const scripts = messages / passes.scripts.seconds;
  const sdk = messages / passes.sdk.seconds;
  return {
    broker,
    setting,
    messages,
    bareMsgPerSecond: bare,
    scriptsMsgPerSecond: scripts,
    sdkMsgPerSecond: sdk,
    ratio: sdk / bare,
    scriptsRatio: scripts / bare,
    sdkOverScripts: sdk / scripts,
    bareCpu: passes.bare.cpu,
    scriptsCpu: passes.scripts.cpu,
    sdkCpu: passes.sdk.cpu,
  };
}
