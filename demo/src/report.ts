import Table from 'cli-table3';
import type { ScenarioReport } from './scenario';

const ROWS: [string, keyof ScenarioReport][] = [
  ['published (incl. duplicates)', 'published'],
  ['duplicates injected', 'duplicatesInjected'],
  ['consumers killed mid-handler', 'consumersKilled'],
  ['deliveries', 'deliveries'],
  ['handler runs', 'handlerRuns'],
  ['duplicates skipped', 'duplicatesSkipped'],
  ['conflicts (held by another worker)', 'conflicts'],
  ['retries (handler failed, released)', 'retries'],
  ['dead-lettered', 'deadLettered'],
  ['charges recorded', 'chargesRecorded'],
  ['charges expected', 'chargesExpected'],
  ['double charges', 'doubleCharges'],
  ['lost payments', 'lost'],
  ['seconds', 'seconds'],
];

/** The side-by-side table: one column per scenario run. */
export function renderReport(broker: string, reports: readonly ScenarioReport[]): string {
  const head = [
    '',
    ...reports.map((r) => (r.mode === 'sdk' ? 'with idempotent-consumer' : 'without (naive consumer)')),
  ];
  const table = new Table({ head, style: { head: [], border: [] } });
  for (const [label, key] of ROWS) {
    table.push([label, ...reports.map((r) => (key === 'seconds' ? r.seconds.toFixed(1) : String(r[key])))]);
  }
  return `Payments on ${broker} + Redis\n${table.toString()}`;
}

/** True when the run charged every payment exactly once. */
export function isEffectivelyOnce(report: ScenarioReport): boolean {
  return report.chargesRecorded === report.chargesExpected && report.lost === 0 && report.doubleCharges === 0;
}
