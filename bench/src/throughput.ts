import type { BareScripts } from './bare-scripts';
import { type Contender, noopHandler } from './contender';
import { concurrent, median, sequential, type ThroughputStats } from './measure';

/** One contender's runs over several rounds, and its ratio to the reference of the same round. */
export interface Series {
  readonly name: string;
  /** Per round, in the order measured. */
  readonly rounds: ThroughputStats[];
  /** Median over rounds of (this msg/s ÷ the reference's msg/s in the same round). */
  readonly ratio: number;
  /** Median over rounds of (this p99 ÷ the reference's p99 in the same round). */
  readonly p99Ratio: number;
}

/** Median of a stat over rounds. */
export const med = (s: Series, pick: (t: ThroughputStats) => number) => median(s.rounds.map(pick));

/**
 * Runs every contender once per round on fresh keys (`<round>-<i>`), the order rotated each round so no one
 * always runs first on a cold or a hot machine, and relates each to `contenders[0]` (the reference) of the
 * same round. Returns the series and the keys each contender completed (for the duplicate pass).
 */
export async function measureRounds(
  contenders: readonly Contender[],
  rounds: number,
  count: number,
  inFlight: number,
  tag: string,
  op: (c: Contender, key: string) => Promise<unknown> = (c, key) => c.process(key, noopHandler),
): Promise<Series[]> {
  const perRound = contenders.map(() => [] as ThroughputStats[]);
  for (let r = 0; r < rounds; r++) {
    for (let j = 0; j < contenders.length; j++) {
      const index = (j + r) % contenders.length;
      const c = contenders[index]!;
      const run = (i: number) => op(c, `${tag}-${r}-${i}`);
      perRound[index]!.push(
        inFlight === 1 ? await sequential(count, run) : await concurrent(count, inFlight, run),
      );
    }
  }
  const reference = perRound[0]!;
  return contenders.map((c, i) => ({
    name: c.name,
    rounds: perRound[i]!,
    ratio: median(perRound[i]!.map((s, r) => s.perSecond / reference[r]!.perSecond)),
    p99Ratio: median(perRound[i]!.map((s, r) => s.p99Us / reference[r]!.p99Us)),
  }));
}

/** The duplicate path's reference: one bare claim of a completed key (what the claim script alone costs). */
export function bareClaimOnly(bare: BareScripts): Contender {
  return {
    name: 'bare ioredis: EVALSHA claim (DUPLICATE reply)',
    process: (key) => bare.claim(key),
    close: async () => {},
  };
}
