import Table from 'cli-table3';
import type { AdapterRow } from './adapters/adapter-row';
import type { ClaimManyRow } from './claim-many';
import type { HandoffRow } from './handoff';
import type { HttpGroup } from './http/section';
import type { MemoryRow } from './memory';
import type { RaceResult, StalledOwnerVerdict } from './race';
import { med, type Series } from './throughput';

const us = (v: number) => (v < 10 ? v.toFixed(2) : v < 100 ? v.toFixed(1) : v.toFixed(0));
const int = (v: number) => Math.round(v).toLocaleString('en-US');
const x = (v: number) => `${v.toFixed(2)}×`;
/** Colours only on a terminal, so a piped or logged table stays plain text. */
const style = process.stdout.isTTY ? {} : { style: { head: [], border: [] } };

/** A throughput/latency table; ratios are medians over rounds against the first row of the same round. */
export function seriesTable(title: string, series: readonly Series[], ratioHead: string): string {
  const table = new Table({
    head: [
      title,
      'in flight',
      'msg/s',
      'p50 µs',
      'p99 µs',
      ratioHead,
      'p99 vs ref',
      'CPU µs/msg: Node',
      'Redis',
    ],
    ...style,
  });
  for (const s of series) {
    table.push([
      s.name,
      s.rounds[0]!.inFlight,
      int(med(s, (t) => t.perSecond)),
      us(med(s, (t) => t.p50Us)),
      us(med(s, (t) => t.p99Us)),
      x(s.ratio),
      x(s.p99Ratio),
      s.cpu ? us(s.cpu.node) : 'n/a',
      s.cpu?.redis === undefined ? 'n/a' : us(s.cpu.redis),
    ]);
  }
  return table.toString();
}

/** Correctness under contention, per contender. */
export function raceTable(
  rows: readonly { name: string; race: RaceResult; stalled: StalledOwnerVerdict }[],
): string {
  const table = new Table({
    head: [
      'contender',
      'keys × callers',
      'handler runs',
      'keys run twice',
      'busy',
      'errors',
      'duplicate after a stalled owner gets',
    ],
    ...style,
  });
  for (const { name, race, stalled } of rows) {
    table.push([
      name,
      `${race.keys} × ${race.callers}`,
      race.runs,
      race.keysRunTwice,
      race.busy,
      race.errors,
      stalled,
    ]);
  }
  return table.toString();
}

export function claimManyTable(rows: readonly ClaimManyRow[]): string {
  const table = new Table({
    head: ['claimMany', 'calls', 'round trips per call (one node)', 'keys/s', 'p50 µs per call'],
    ...style,
  });
  for (const r of rows)
    table.push([`${r.batch} keys`, r.calls, r.writesPerCall.toFixed(2), int(r.keysPerSecond), us(r.p50Us)]);
  return table.toString();
}

export function adapterTable(rows: readonly AdapterRow[]): string {
  const table = new Table({
    head: [
      'adapter',
      'setting',
      'messages',
      'bare client msg/s',
      'bare + scripts msg/s',
      'with the SDK msg/s',
      'SDK ÷ bare',
      'scripts ÷ bare',
      'SDK ÷ scripts',
      'CPU µs/msg, bare / scripts / SDK: Node',
      'Redis',
      'broker',
    ],
    ...style,
  });
  const three = (r: AdapterRow, of: keyof AdapterRow['bareCpu']) => {
    const values = [r.bareCpu[of], r.scriptsCpu[of], r.sdkCpu[of]];
    return values.some((v) => v === undefined) ? 'n/a' : values.map((v) => int(v!)).join(' / ');
  };
  for (const r of rows)
    table.push([
      r.broker,
      r.setting,
      r.messages,
      int(r.bareMsgPerSecond),
      int(r.scriptsMsgPerSecond),
      int(r.sdkMsgPerSecond),
      x(r.ratio),
      x(r.scriptsRatio),
      x(r.sdkOverScripts),
      three(r, 'node'),
      three(r, 'redis'),
      three(r, 'broker'),
    ]);
  return table.toString();
}

export function memoryTable(rows: readonly MemoryRow[]): string {
  const table = new Table({
    head: [
      'memory per record',
      'records',
      'result bytes',
      'used_memory B/record',
      'string key B',
      'ratio',
      'MEMORY USAGE B',
      'string key B',
      'ratio',
    ],
    ...style,
  });
  for (const r of rows) {
    table.push([
      r.shape,
      r.records,
      r.resultBytes,
      int(r.usedMemoryPerRecord),
      int(r.referencePerRecord),
      x(r.usedMemoryPerRecord / r.referencePerRecord),
      int(r.memoryUsage),
      int(r.referenceMemoryUsage),
      x(r.memoryUsage / r.referenceMemoryUsage),
    ]);
  }
  return table.toString();
}

/** One target of the bench and whether this run met it. */
export interface Target {
  readonly target: string;
  readonly measured: string;
  readonly met: boolean;
}

export function targetTable(targets: readonly Target[]): string {
  const table = new Table({ head: ['target', 'measured', 'met'], ...style });
  for (const t of targets) table.push([t.target, t.measured, t.met ? 'yes' : 'NO']);
  return table.toString();
}

/** Holder's complete → waiting duplicate's settle. */
export function handoffTable(rows: readonly HandoffRow[]): string {
  const table = new Table({
    head: ['duplicate waiting for the holder (conflictWaitMs)', 'samples', 'p50 µs', 'p99 µs', 'mean µs'],
    ...style,
  });
  for (const r of rows) {
    table.push([
      r.notifications ? 'outcome notifications (sharded Pub/Sub)' : 'polling only',
      r.stats.count,
      us(r.stats.p50Us),
      us(r.stats.p99Us),
      us(r.stats.meanUs),
    ]);
  }
  return table.toString();
}

/** The HTTP section: per framework, each contender's req/s, p50/p99 and ratio to the bare route. */
export function httpTable(groups: readonly HttpGroup[]): string {
  const table = new Table({
    head: [
      'HTTP: route, idempotency layer',
      'seq req/s',
      'seq p50 µs',
      'p50 added µs',
      'seq vs bare',
      '32 in flight req/s',
      'p50 µs',
      'p99 µs',
      'vs bare',
      'CPU µs/req: Node',
      'Redis',
    ],
    ...style,
  });
  for (const g of groups) {
    g.concurrent.forEach((c, i) => {
      const s = g.sequential[i]!;
      table.push([
        c.name,
        int(med(s, (t) => t.perSecond)),
        us(med(s, (t) => t.p50Us)),
        i === 0 ? '' : us(g.addedP50Us[c.name] ?? Number.NaN),
        x(s.ratio),
        int(med(c, (t) => t.perSecond)),
        us(med(c, (t) => t.p50Us)),
        us(med(c, (t) => t.p99Us)),
        x(c.ratio),
        c.cpu ? us(c.cpu.node) : 'n/a',
        c.cpu?.redis === undefined ? 'n/a' : us(c.cpu.redis),
      ]);
    });
  }
  return table.toString();
}

/** The HTTP race: how often each layer ran the handler when callers raced on one key. */
export function httpRaceTable(groups: readonly HttpGroup[]): string {
  const table = new Table({
    head: ['HTTP race: layer', 'keys × callers', 'handler runs', 'keys run twice', 'answers', 'errors'],
    ...style,
  });
  for (const g of groups) {
    for (const { name, race } of g.race) {
      const answers = Object.entries(race.statuses)
        .map(([status, n]) => `${n} × ${status}`)
        .join(', ');
      table.push([
        name,
        `${race.keys} × ${race.callers}`,
        race.runs,
        race.keysRunTwice,
        answers,
        race.errors,
      ]);
    }
  }
  return table.toString();
}
