import Table from 'cli-table3';
import type { LatencyStats, ThroughputStats } from './measure';
import type { MemoryRow } from './memory';

const us = (v: number) => (v < 10 ? v.toFixed(2) : v < 100 ? v.toFixed(1) : v.toFixed(0));
const ratio = (v: number, reference: number) => `${(v / reference).toFixed(2)}×`;
/** Colours only on a terminal, so a piped or logged table stays plain text. */
const style = process.stdout.isTTY ? {} : { style: { head: [], border: [] } };

/** Sequential latency per message, with the p50 ratio against the reference row. */
export function latencyTable(rows: [string, LatencyStats][], referenceName: string): string {
  const reference = rows.find(([name]) => name === referenceName)![1];
  const table = new Table({
    head: ['sequential (1 in flight)', 'messages', 'p50 µs', 'p99 µs', 'mean µs', 'p50 vs reference'],
    ...style,
  });
  for (const [name, s] of rows) {
    table.push([name, s.count, us(s.p50Us), us(s.p99Us), us(s.meanUs), ratio(s.p50Us, reference.p50Us)]);
  }
  return table.toString();
}

/** Concurrent throughput, with the ratio against the reference measured with the same client settings. */
export function throughputTable(rows: [string, boolean, ThroughputStats][], referenceName: string): string {
  const table = new Table({
    head: ['concurrent', 'auto-pipelining', 'in flight', 'messages', 'msg/s', 'µs/msg', 'time vs reference'],
    ...style,
  });
  for (const [name, pipelining, s] of rows) {
    const reference = rows.find(([n, p]) => n === referenceName && p === pipelining)![2];
    table.push([
      name,
      pipelining ? 'on' : 'off',
      s.inFlight,
      s.count,
      Math.round(s.perSecond).toLocaleString('en-US'),
      us(1e6 / s.perSecond),
      ratio(reference.perSecond, s.perSecond),
    ]);
  }
  return table.toString();
}

/** Memory per record (`MEMORY USAGE`), with the ratio against the reference's string key. */
export function memoryTable(rows: MemoryRow[]): string {
  const reference = rows[0]!.bytes;
  const table = new Table({ head: ['memory per record', 'bytes', 'vs reference'], ...style });
  for (const row of rows) table.push([row.what, row.bytes, ratio(row.bytes, reference)]);
  return table.toString();
}
