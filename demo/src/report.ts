import Table from 'cli-table3';
import type { ScenarioReport } from './scenario';

/** One row of the table: its label and how to read it from a run's report. */
type Row = readonly [label: string, value: (r: ScenarioReport) => string];

const n = (key: keyof ScenarioReport) => (r: ScenarioReport) => String(r[key]);
/** Counters only the SDK has (outcomes of a claim) read "-" in the naive column. */
const sdkOnly = (key: keyof ScenarioReport) => (r: ScenarioReport) =>
  r.mode === 'sdk' ? String(r[key]) : '-';

/**
 * The rows, grouped so that the numbers explain each other: handler runs = gateway timeouts + killed +
 * charges; deliveries also count the ones not run, dead-lettered, or lost with the killed process. Labels
 * stay within 40 columns so that the table (two value columns) fits an 80-column terminal.
 */
const ROWS: readonly Row[] = [
  ['messages published', n('published')],
  ['  of which duplicates (same payment)', n('duplicatesInjected')],
  ['deliveries (redeliveries included)', n('deliveries')],
  ['  not run: key already completed', sdkOnly('duplicatesSkipped')],
  ['  not run: key held by another consumer', sdkOnly('conflicts')],
  ['  dead-lettered', n('deadLettered')],
  ['handler runs', n('handlerRuns')],
  ['  gateway timeout, nothing charged', n('gatewayTimeouts')],
  ['  killed mid-handler (SIGKILL)', n('consumersKilled')],
  ['  charged', n('chargesRecorded')],
  ['payments', n('chargesExpected')],
  ['  charged more than once', n('doubleChargedPayments')],
  ['  never charged (lost)', n('lost')],
  ['extra charges (double charges)', n('doubleCharges')],
  ['seconds', (r) => r.seconds.toFixed(1)],
];

/** What the rows mean, printed under the table (78 columns). */
const LEGEND = [
  'Not run: the SDK acks a delivery whose key is completed and retries one whose',
  'key another consumer holds. Handler runs = gateway timeouts (released, run',
  'again) + the run killed mid-handler (redelivered, charged once) + charges.',
  'Without the SDK every delivery runs the handler, duplicates and redeliveries',
  'too: double charges.',
];

/** The side-by-side table: one column per scenario run, at most 80 columns wide. */
export function renderReport(broker: string, reports: readonly ScenarioReport[]): string {
  const head = ['', ...reports.map((r) => (r.mode === 'sdk' ? 'with SDK' : 'naive'))];
  const table = new Table({
    head,
    style: { head: [], border: [] },
    colAligns: ['left', ...reports.map(() => 'right' as const)],
  });
  for (const [label, value] of ROWS) table.push([label, ...reports.map(value)]);
  return `Payments on ${broker} + Redis\n${table.toString()}\n${LEGEND.join('\n')}`;
}

/** True when the run charged every payment exactly once. */
export function isEffectivelyOnce(report: ScenarioReport): boolean {
  return report.chargesRecorded === report.chargesExpected && report.lost === 0 && report.doubleCharges === 0;
}
