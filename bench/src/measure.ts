import { performance } from 'node:perf_hooks';

/** Latency statistics of one scenario, in microseconds. */
export interface LatencyStats {
  readonly count: number;
  readonly meanUs: number;
  readonly p50Us: number;
  readonly p99Us: number;
}

/** Throughput of one concurrent scenario, with the latency of each call while `inFlight` were outstanding. */
export interface ThroughputStats extends LatencyStats {
  readonly inFlight: number;
  readonly seconds: number;
  readonly perSecond: number;
}

/** The `q` quantile (0..1) of sorted values, nearest rank. */
export function quantile(sorted: ArrayLike<number>, q: number): number {
  const index = Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1));
  return sorted[index]!;
}

/** Mean, p50 and p99 of samples in microseconds. */
export function latencyOf(samples: Float64Array): LatencyStats {
  const sorted = Float64Array.from(samples).sort();
  let sum = 0;
  for (const v of sorted) sum += v;
  return {
    count: sorted.length,
    meanUs: sum / sorted.length,
    p50Us: quantile(sorted, 0.5),
    p99Us: quantile(sorted, 0.99),
  };
}

/** Runs `op(i)` for i = 0..count-1 one after another and returns per-call latencies. */
export async function sequential(
  count: number,
  op: (i: number) => Promise<unknown>,
): Promise<ThroughputStats> {
  return concurrent(count, 1, op);
}

/** Runs `op(i)` for i = 0..count-1 with `inFlight` calls outstanding at any time. */
export async function concurrent(
  count: number,
  inFlight: number,
  op: (i: number) => Promise<unknown>,
): Promise<ThroughputStats> {
  const samples = new Float64Array(count);
  let next = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: Math.min(inFlight, count) }, async () => {
      while (next < count) {
        const i = next++;
        const t = performance.now();
        await op(i);
        samples[i] = (performance.now() - t) * 1000;
      }
    }),
  );
  const seconds = (performance.now() - started) / 1000;
  return { ...latencyOf(samples), inFlight, seconds, perSecond: count / seconds };
}

/** The median of numbers (the mean of the middle two for an even count). */
export function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}
