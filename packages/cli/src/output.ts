import Table from 'cli-table3';
import type { TrackedStream } from './tracked-stream';

/** Writes a command's result: JSON for `--json`, otherwise the human form. */
export interface Output {
  readonly json: boolean;
  /** Writes `value` as one JSON document (with `--json`) or calls `human` to print it. */
  result(value: unknown, human: () => string): void;
  /** A line for a person on stderr (progress, warnings); kept out of stdout so `--json` stays parseable. */
  note(line: string): void;
}

/** The {@link Output} of a run, on its followed stdout and stderr (see `trackWrites`). */
export function output(
  streams: { readonly stdout: TrackedStream; readonly stderr: TrackedStream },
  json: boolean,
): Output {
  return {
    json,
    result(value, human) {
      streams.stdout.write(json ? `${JSON.stringify(value, null, 2)}\n` : `${human()}\n`);
    },
    note(line) {
      streams.stderr.write(`${line}\n`);
    },
  };
}

/** cli-table3 drawing characters without the rule between rows. */
const COMPACT = { mid: '', 'left-mid': '', 'mid-mid': '', 'right-mid': '' };

/** A table with a header row (cli-table3), borders kept plain so it pastes well into tickets. */
export function table(head: string[], rows: (string | number)[][]): string {
  const t = new Table({ head, chars: COMPACT, style: { head: [], border: [] } });
  t.push(...rows.map((r) => r.map(String)));
  return t.toString();
}

/** A two-column field/value table for one record. */
export function fieldTable(fields: [string, string | number][]): string {
  const t = new Table({
    chars: COMPACT,
    style: { head: [], border: [] },
    wordWrap: true,
    colWidths: [22, 78],
  });
  t.push(...fields.map(([name, value]) => ({ [name]: String(value) })));
  return t.toString();
}
