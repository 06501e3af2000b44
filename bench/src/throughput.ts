import type { BareScripts } from './bare-scripts';
import { type Contender, noopHandler } from './contender';
import { type CpuMeter, type CpuPerMessage, cpuPerMessage } from './cpu-meter';
import { concurrent, median, sequential, type ThroughputStats } from './measure';

/** One round of one contender: its throughput and, when measured, the CPU time per message. */
export interface RoundStats extends ThroughputStats {
  readonly cpu?: CpuPerMessage;
}

/** One contender's runs over several rounds, and its ratio to the reference of the same round. */
export interface Series {
  readonly name: string;
  /** Per round, in the order measured. */
  readonly rounds: RoundStats[];
  /** Median over rounds of (this msg/s ÷ the reference's msg/s in the same round). */
  readonly ratio: number;
  /** Median over rounds of (this p99 ÷ the reference's p99 in the same round). */
  readonly p99Ratio: number;
  /** Median over rounds of the CPU time per message of this process and of Redis, µs (with a meter). */
  readonly cpu?: CpuPerMessage;
}

/** Median of a stat over rounds. */
export const med = (s: Series, pick: (t: RoundStats) => number) => median(s.rounds.map(pick));

/**
 * Runs every contender once per round on fresh keys (`<round>-<i>`), the order rotated each round so no one
 * always runs first on a cold or a hot machine, and relates each to `contenders[0]` (the reference) of the
 * same round. Each key is processed with the no-op handler; a key measured twice (the duplicate pass)
 * finds its record completed. With `meter`, each round also reads the CPU time per message of this
 * process and of the Redis server (which of the two was busy).
 */
export async function measureRounds(
  contenders: readonly Contender[],
  rounds: number,
  count: number,
  inFlight: number,
  tag: string,
  meter?: CpuMeter,
): Promise<Series[]> {
  const perRound = contenders.map(() => [] as RoundStats[]);
  for (let r = 0; r < rounds; r++) {
    for (let j = 0; j < contenders.length; j++) {
      const index = (j + r) % contenders.length;
      const c = contenders[index]!;
      const run = (i: number) => c.process(`${tag}-${r}-${i}`, noopHandler);
      const before = await meter?.read();
      const stats = inFlight === 1 ? await sequential(count, run) : await concurrent(count, inFlight, run);
      const after = await meter?.read();
      perRound[index]!.push(before && after ? { ...stats, cpu: cpuPerMessage(before, after, count) } : stats);
    }
  }
  const reference = perRound[0]!;
  return contenders.map((c, i) => {
    const own = perRound[i]!;
    const redis = own.every((s) => s.cpu?.redis !== undefined)
      ? { redis: median(own.map((s) => s.cpu!.redis!)) }
      : {};
    const cpu = own.every((s) => s.cpu) ? { node: median(own.map((s) => s.cpu!.node)), ...redis } : undefined;
    return {
      name: c.name,
      rounds: own,
      ratio: median(own.map((s, r) => s.perSecond / reference[r]!.perSecond)),
      p99Ratio: median(own.map((s, r) => s.p99Us / reference[r]!.p99Us)),
      ...(cpu ? { cpu } : {}),
    };
  });
}

/** The duplicate path's reference: one bare claim of a completed key (what the claim script alone costs). */
export function bareClaimOnly(
  bare: BareScripts,
  name = 'bare ioredis: EVALSHA claim (DUPLICATE reply)',
): Contender {
  return {
    name,
    process: (key) => bare.claim(key),
    close: async () => {},
  };
}
