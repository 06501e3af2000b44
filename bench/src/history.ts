/**
 * The bench's history: each full run leaves one small JSON file in `bench/results/`, named by its date,
 * with the commit and machine it ran on and every ratio it measured. `latest.json` beside them keeps every
 * round of the newest run. `npm run bench:trend` prints the files as one table (trend.ts).
 */
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { AdapterRow } from './adapters/adapter-row';
import type { ClaimManyRow } from './claim-many';
import type { MemoryRow } from './memory';
import type { RaceResult } from './race';
import type { Target } from './report';
import type { Series } from './throughput';

/** The machine a run measured on, as `npm run bench` prints it. */
export interface Machine {
  readonly node: string;
  readonly cpus: string;
  readonly memoryGiB: number;
  /** 1, 5 and 15 minute load averages when the run started. */
  readonly loadAverage: readonly number[];
  readonly redis: string;
}

/** The parts of a run's results that carry ratios; `latest.json` has this shape and more. */
export interface RunResults {
  readonly core?: {
    readonly concurrent: readonly Series[];
    readonly sequential: readonly Series[];
    readonly duplicates: readonly Series[];
    readonly sequentialDuplicates: readonly Series[];
  };
  readonly peers?: {
    readonly concurrent: readonly Series[];
    readonly duplicates: readonly Series[];
    readonly race: readonly { readonly name: string; readonly race: RaceResult }[];
  };
  readonly claimMany?: readonly ClaimManyRow[];
  /** Runs before the bench measured the scripts alone have no `scriptsRatio` or `sdkOverScripts`. */
  readonly adapters?: {
    readonly rows: readonly (Pick<AdapterRow, 'broker' | 'ratio'> &
      Partial<Pick<AdapterRow, 'scriptsRatio' | 'sdkOverScripts'>>)[];
  };
  readonly memory?: { readonly rows: readonly MemoryRow[] } | { readonly skipped: string };
}

/** One full run in the history. */
export interface RunRecord {
  /** When the run ended, ISO 8601 UTC. */
  readonly date: string;
  /** The commit checked out when the run started, or null when unknown. */
  readonly commit: string | null;
  /** Whether the checkout had uncommitted changes outside `bench/results`. */
  readonly dirty?: boolean;
  /** For a run recovered from git: the commit that recorded its `latest.json`. */
  readonly recordedIn?: string;
  readonly seconds: number;
  readonly machine: Machine;
  /**
   * Every ratio of the run, by a name of the form `section | table | row`. A `core` row is divided by its
   * table's bare scripts, a `peers` row is ours ÷ the peer, and `, p99` ends a ratio of p99 latencies.
   */
  readonly ratios: Readonly<Record<string, number>>;
  readonly targets: readonly Target[];
}

const round = (v: number) => Number(v.toPrecision(4));

/** Every ratio of a run, each named `section | table | row`, rounded to four significant digits. */
export function ratiosOf(results: RunResults): Record<string, number> {
  const ratios: Record<string, number> = {};
  const put = (name: string, value: number | undefined) => {
    if (value !== undefined && Number.isFinite(value)) ratios[name] = round(value);
  };
  const core = results.core;
  if (core) {
    const tables: [string, readonly Series[]][] = [
      ['new keys, concurrent', core.concurrent],
      ['new keys, sequential', core.sequential],
      ['duplicates, concurrent', core.duplicates],
      ['duplicates, sequential', core.sequentialDuplicates],
    ];
    for (const [table, series] of tables) {
      // Each row is divided by the table's first row, the bare scripts.
      for (const s of series.slice(1)) {
        put(`core | ${table} | ${s.name}`, s.ratio);
        put(`core | ${table} | ${s.name}, p99`, s.p99Ratio);
      }
    }
  }
  const peers = results.peers;
  if (peers) {
    // The peers' rows are divided by ours; the ratio kept is ours ÷ the peer, as the targets read.
    for (const [table, series] of [
      ['new keys', peers.concurrent],
      ['duplicates', peers.duplicates],
    ] as const) {
      for (const s of series.slice(1)) put(`peers | ${table} | ours ÷ ${s.name}`, 1 / s.ratio);
    }
    for (const r of peers.race)
      put(`peers | race | ${r.name}, handler runs per key`, r.race.runs / r.race.keys);
  }
  for (const c of results.claimMany ?? [])
    put(`claimMany | ${c.batch} keys | writes per call`, c.writesPerCall);
  for (const a of results.adapters?.rows ?? []) {
    put(`adapters | ${a.broker} | SDK ÷ bare`, a.ratio);
    put(`adapters | ${a.broker} | scripts ÷ bare`, a.scriptsRatio);
    put(`adapters | ${a.broker} | SDK ÷ scripts`, a.sdkOverScripts);
  }
  if (results.memory && 'rows' in results.memory) {
    for (const m of results.memory.rows) {
      put(`memory | ${m.shape} | used_memory ÷ string key`, m.usedMemoryPerRecord / m.referencePerRecord);
      put(`memory | ${m.shape} | MEMORY USAGE ÷ string key`, m.memoryUsage / m.referenceMemoryUsage);
    }
  }
  return ratios;
}

/** The commit checked out in `cwd` and whether it has uncommitted changes; nulls outside a git checkout. */
export function checkout(cwd = process.cwd()): { commit: string | null; dirty?: boolean } {
  const git = (...args: string[]) =>
    execFileSync('git', args, { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
  try {
    const commit = git('rev-parse', 'HEAD');
    const changes = git('status', '--porcelain', '--untracked-files=no', '--', '.', ':!bench/results');
    return { commit, dirty: changes !== '' };
  } catch {
    return { commit: null };
  }
}

/** The file name of a run: its date with the colons and milliseconds left out, so names sort by date. */
export function recordFileName(date: string): string {
  return `${date.replace(/\.\d+Z$/, 'Z').replaceAll(':', '-')}.json`;
}

/** Writes one run into `dir` and returns the file's path. */
export function writeRunRecord(dir: string, run: RunRecord): string {
  const path = join(dir, recordFileName(run.date));
  writeFileSync(path, `${JSON.stringify(run, null, 2)}\n`);
  return path;
}

/** Every run kept in `dir`, oldest first; `latest.json` and other files without ratios are left out. */
export function readRunRecords(dir: string): RunRecord[] {
  return readdirSync(dir)
    .filter((f) => f.endsWith('.json') && f !== 'latest.json')
    .map((f) => JSON.parse(readFileSync(join(dir, f), 'utf8')) as RunRecord)
    .filter((r) => typeof r.date === 'string' && typeof r.ratios === 'object')
    .sort((a, b) => a.date.localeCompare(b.date));
}
