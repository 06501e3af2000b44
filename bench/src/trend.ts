/**
 * `npm run bench:trend [-- --last 10] [-- --match <text>]`: prints the bench's history from the run files
 * in `bench/results/`, one row per full run, oldest first. By default it shows the ratios that have a
 * target; `--match` shows every ratio whose name contains the text instead.
 */
import Table from 'cli-table3';
import { Command } from 'commander';
import { type RunRecord, readRunRecords } from './history';

/** A column: its heading, its target, and how to find its ratio among a run's ratio names. */
type Column = readonly [heading: string, target: string, find: (name: string) => boolean];

const ratioOf =
  (prefix: string, suffix = '') =>
  (name: string) =>
    name.startsWith(prefix) && name.endsWith(suffix) && !name.endsWith(', p99');

/** The ratios that have a target. */
const HEADLINE: readonly Column[] = [
  ['run', '≥ 0.85', ratioOf('core | new keys, concurrent | idempotent-consumer')],
  ['sequential', '≥ 0.90', ratioOf('core | new keys, sequential | idempotent-consumer')],
  ['duplicates', '≥ 0.90', ratioOf('core | duplicates, concurrent | idempotent-consumer')],
  ['÷ PT', '≥ 2', ratioOf('peers | new keys | ours ÷ Powertools', 'no context')],
  ['÷ PT ctx', '≥ 2', ratioOf('peers | new keys | ours ÷ Powertools', 'Lambda context')],
  ['÷ MQT', '> 1', ratioOf('peers | new keys | ours ÷ message-queue-toolkit')],
  ['RabbitMQ', '≥ 0.67', ratioOf('adapters | RabbitMQ | SDK ÷ bare')],
  ['Kafka', '≥ 0.67', ratioOf('adapters | Kafka', '| SDK ÷ bare')],
  ['SQS', '≥ 0.67', ratioOf('adapters | SQS | SDK ÷ bare')],
  ['memory', '≤ 1.15', ratioOf('memory | small result | used_memory')],
  ['mem, fp', '≤ 1.35', ratioOf('memory | small result + fingerprint | used_memory')],
];

const LEGEND = `run: Idempotency.run ÷ the bare scripts, new keys at 50 in flight; sequential: the same one at a time;
duplicates: ÷ one bare claim; PT, MQT: ours ÷ Powertools (no context, or a Lambda context) and
message-queue-toolkit; RabbitMQ, Kafka, SQS: the adapter ÷ the bare broker client; memory: a completed record
÷ a string key holding the result (fp: with a payload fingerprint). commit "in <sha>": the run was recovered
from the commit that recorded its latest.json; "+": the checkout had uncommitted changes.`;

/** The checkout a run measured: its commit, `+` when it had uncommitted changes, or where git recorded it. */
function commitOf(run: RunRecord): string {
  if (run.commit) return `${run.commit.slice(0, 7)}${run.dirty ? '+' : ''}`;
  return run.recordedIn ? `in ${run.recordedIn.slice(0, 7)}` : '?';
}

/** `2 × Intel(R) Xeon(R) Processor` → `2 × Intel Xeon`. */
const cpusOf = (run: RunRecord) =>
  run.machine.cpus
    .replace(/\((R|TM)\)|Processor|CPU.*$/g, '')
    .replace(/\s+/g, ' ')
    .trim();

/** Table lines without a rule between rows. */
const COMPACT = { mid: '', 'left-mid': '', 'mid-mid': '', 'right-mid': '' };

function main(): void {
  const o = new Command('bench:trend')
    .description("Prints the bench's full runs kept in bench/results, oldest first")
    .option('--dir <dir>', 'where the run files are', 'bench/results')
    .option('--last <n>', 'only the last n runs', (v) => Number.parseInt(v, 10))
    .option('--match <text>', 'every ratio whose name contains this text, instead of the targets')
    .parse(process.argv.slice(2), { from: 'user' })
    .opts<{ dir: string; last?: number; match?: string }>();
  const runs = readRunRecords(o.dir).slice(-(o.last ?? 0));
  const names = [...new Set(runs.flatMap((r) => Object.keys(r.ratios)))];
  const columns: readonly Column[] = o.match
    ? names.filter((n) => n.includes(o.match!)).map((n) => [n, '', (m: string) => m === n] as const)
    : HEADLINE;
  const table = new Table({
    head: ['date (UTC)', 'commit', 'machine', 'load', 'met', ...columns.map(([heading]) => heading)],
    style: { head: [], border: [] },
    chars: COMPACT,
    ...(o.match ? { colWidths: [18, 12, 15, 6, 9, ...columns.map(() => 16)], wordWrap: true } : {}),
  });
  if (!o.match) table.push(['target', '', '', '', '', ...columns.map(([, target]) => target)]);
  for (const run of runs) {
    const ratio = (find: Column[2]) => {
      const name = Object.keys(run.ratios).find(find);
      return name === undefined ? '' : run.ratios[name]!.toFixed(2);
    };
    table.push([
      run.date.slice(0, 16).replace('T', ' '),
      commitOf(run),
      cpusOf(run),
      run.machine.loadAverage[0]!.toFixed(1),
      `${run.targets.filter((t) => t.met).length}/${run.targets.length}`,
      ...columns.map(([, , find]) => ratio(find)),
    ]);
  }
  process.stdout.write(
    `${table.toString()}\n${runs.length} full runs in ${o.dir}. ${o.match ? '' : LEGEND}\n`,
  );
}

main();
