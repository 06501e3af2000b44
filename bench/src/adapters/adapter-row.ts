import { performance } from 'node:perf_hooks';

/** Messages per second through one adapter and through the same broker client without the SDK. */
export interface AdapterRow {
  readonly broker: string;
  readonly setting: string;
  readonly messages: number;
  readonly bareMsgPerSecond: number;
  readonly sdkMsgPerSecond: number;
  /** sdk ÷ bare: the target is at least 2/3 (the SDK costs at most a third). */
  readonly ratio: number;
  /**
   * CPU time of this Node process per message (user + system, µs) from the first settled message to the
   * last, bare and with the SDK: where the SDK's cost goes when the broker, Redis and Node share the cores.
   */
  readonly bareCpuUsPerMessage: number;
  readonly sdkCpuUsPerMessage: number;
}

/** How long `total` messages took to settle, and this process's CPU time meanwhile. */
export interface Settled {
  readonly seconds: number;
  readonly cpuUs: number;
}

/**
 * Counts settled messages and resolves when `total` have settled; the clock starts at the first one (so a
 * consumer group's join or a first long poll is not counted).
 */
export function settleCounter(total: number, timeoutMs = 120_000) {
  let count = 0;
  let first = 0;
  let firstCpu: NodeJS.CpuUsage | undefined;
  let resolve!: (settled: Settled) => void;
  let reject!: (error: Error) => void;
  const done = new Promise<Settled>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  const timer = setTimeout(
    () => reject(new Error(`only ${count} of ${total} messages settled within ${timeoutMs} ms`)),
    timeoutMs,
  );
  timer.unref();
  done.catch(() => {}); // a caller that gave up early must not crash the run with an unhandled rejection
  return {
    settled(n = 1): void {
      if (count === 0) {
        first = performance.now();
        firstCpu = process.cpuUsage();
      }
      count += n;
      if (count >= total) {
        clearTimeout(timer);
        const cpu = process.cpuUsage(firstCpu);
        resolve({ seconds: (performance.now() - first) / 1000, cpuUs: cpu.user + cpu.system });
      }
    },
    /** Seconds from the first settled message to the last, and the CPU time meanwhile. */
    done,
  };
}

export function row(
  broker: string,
  setting: string,
  messages: number,
  bareSettled: Settled,
  sdkSettled: Settled,
): AdapterRow {
  const bare = messages / bareSettled.seconds;
  const sdk = messages / sdkSettled.seconds;
  return {
    broker,
    setting,
    messages,
    bareMsgPerSecond: bare,
    sdkMsgPerSecond: sdk,
    ratio: sdk / bare,
    bareCpuUsPerMessage: bareSettled.cpuUs / messages,
    sdkCpuUsPerMessage: sdkSettled.cpuUs / messages,
  };
}
