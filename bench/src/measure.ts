import { performance } from 'node:perf_hooks';

/** Latency statistics of one sequential scenario, in microseconds. */
export interface LatencyStats {
  readonly count: number;
  readonly meanUs: number;
  readonly p50Us: number;
  readonly p99Us: number;
}

/** Throughput of one concurrent scenario. */
export interface ThroughputStats {
  readonly count: number;
  readonly inFlight: number;
  readonly seconds: number;
  readonly perSecond: number;
}

/** The `q` quantile (0..1) of sorted values, nearest rank. */
function quantile(sorted: readonly number[], q: number): number {
  const index = Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1));
  return sorted[index]!;
}

/** Runs `op(i)` for i = 0..count-1 one after another and returns per-call latencies. */
export async function sequential(count: number, op: (i: number) => Promise<unknown>): Promise<LatencyStats> {
  const samples = new Float64Array(count);
  for (let i = 0; i < count; i++) {
    const started = performance.now();
    await op(i);
    samples[i] = (performance.now() - started) * 1000;
  }
  const sorted = [...samples].sort((a, b) => a - b);
  const sum = sorted.reduce((a, b) => a + b, 0);
  return { count, meanUs: sum / count, p50Us: quantile(sorted, 0.5), p99Us: quantile(sorted, 0.99) };
}

/** Runs `op(i)` for i = 0..count-1 with `inFlight` calls outstanding at any time. */
export async function concurrent(
  count: number,
  inFlight: number,
  op: (i: number) => Promise<unknown>,
): Promise<ThroughputStats> {
  let next = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: inFlight }, async () => {
      while (next < count) await op(next++);
    }),
  );
  const seconds = (performance.now() - started) / 1000;
  return { count, inFlight, seconds, perSecond: count / seconds };
}
