import { setTimeout as delay } from 'node:timers/promises';

/** What an inline wait needs from the delivery it belongs to. */
export interface WaitContext {
  /** The consumer's heartbeat; its rejection (a rebalance) ends the wait by propagating. */
  heartbeat(): Promise<void>;
  /** True when the wait should end early (the consumer stops, the batch went stale). */
  shouldStop(): boolean;
}

/**
 * Waits `ms` milliseconds inside a handler call, calling `heartbeat()` every `heartbeatEveryMs` so the
 * group keeps the member, and checking `shouldStop()` in between.
 * @returns false when it ended early because `shouldStop()` turned true.
 * @throws whatever `heartbeat()` rejects with (KafkaJS: a rebalance in progress).
 */
export async function waitHeartbeating(
  ms: number,
  context: WaitContext,
  heartbeatEveryMs: number,
): Promise<boolean> {
  const end = performance.now() + ms;
  let lastBeat = performance.now();
  for (;;) {
    if (context.shouldStop()) return false;
    const left = end - performance.now();
    if (left <= 0) return true;
    await delay(Math.min(left, 100));
    if (performance.now() - lastBeat >= heartbeatEveryMs) {
      lastBeat = performance.now();
      await context.heartbeat();
    }
  }
}

/**
 * Waits for `settled` inside a handler call, calling `heartbeat()` every `heartbeatEveryMs` so the group
 * keeps the member, and checking `shouldStop()` in between.
 * @returns false when it ended early because `shouldStop()` turned true (`settled` may still be pending).
 * @throws whatever `heartbeat()` rejects with (KafkaJS: a rebalance in progress).
 */
export async function heartbeatUntil(
  settled: Promise<unknown>,
  context: WaitContext,
  heartbeatEveryMs: number,
): Promise<boolean> {
  let done = false;
  const finished = settled.then(
    () => {
      done = true;
    },
    () => {
      done = true;
    },
  );
  let lastBeat = performance.now();
  for (;;) {
    if (done) return true;
    if (context.shouldStop()) return false;
    await Promise.race([finished, delay(Math.min(100, heartbeatEveryMs))]);
    if (done) return true;
    if (performance.now() - lastBeat >= heartbeatEveryMs) {
      lastBeat = performance.now();
      await context.heartbeat();
    }
  }
}
