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
}

/**
 * Counts settled messages and resolves when `total` have settled; the clock starts at the first one (so a
 * consumer group's join or a first long poll is not counted).
 */
export function settleCounter(total: number, timeoutMs = 120_000) {
  let count = 0;
  let first = 0;
  let resolve!: (seconds: number) => void;
  let reject!: (error: Error) => void;
  const done = new Promise<number>((res, rej) => {
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
      if (count === 0) first = performance.now();
      count += n;
      if (count >= total) {
        clearTimeout(timer);
        resolve((performance.now() - first) / 1000);
      }
    },
    /** Seconds from the first settled message to the last. */
    done,
  };
}

export function row(
  broker: string,
  setting: string,
  messages: number,
  bareS: number,
  sdkS: number,
): AdapterRow {
  const bare = messages / bareS;
  const sdk = messages / sdkS;
  return { broker, setting, messages, bareMsgPerSecond: bare, sdkMsgPerSecond: sdk, ratio: sdk / bare };
}
