import Table from 'cli-table3';
import type { TrackedStream } from './tracked-stream';

/** Writes a command's result, as JSON for `--json` and otherwise in the human form. */
export interface Output {
  readonly json: boolean;
  /**
   * Writes `value` as one JSON document with `--json`, or calls `human` to print it. Control characters are
   * written out by {@link printable}.
   */
  result(value: unknown, human: () => string): void;
  /**
   * A line for a person on stderr, such as progress or a warning, with control characters written out. It
   * stays out of stdout so that `--json` stays parseable.
   */
  note(line: string): void;
}

/** The {@link Output} of a run, on its followed stdout and stderr from `trackWrites`. */
export function output(
  streams: { readonly stdout: TrackedStream; readonly stderr: TrackedStream },
  json: boolean,
): Output {
  return {
    json,
    result(value, human) {
      streams.stdout.write(json ? `${JSON.stringify(value, null, 2)}\n` : `${printable(human())}\n`);
    },
    note(line) {
      streams.stderr.write(`${printable(line)}\n`);
    },
  };
}

/** C0 control characters but tab and line feed, DEL, and the C1 controls; `\u009b` is a CSI of its own. */
// biome-ignore lint/suspicious/noControlCharactersInRegex: these are what it finds
const CONTROL = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/g;

/**
 * `text` with its control characters written out as `\r` or `\u001b`, keeping line feeds and tabs. Keys,
 * results and errors come from messages and handlers. An ESC sequence or a carriage return among them would
 * otherwise reach the operator's terminal, where it could retitle or clear it or print over the table. Text
 * without them is returned as it is, and text already made printable stays the same.
 */
export function printable(text: string): string {
  return text.replace(CONTROL, (c) =>
    c === '\r' ? '\\r' : `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`,
  );
}

/** cli-table3 drawing characters without the rule between rows. */
const COMPACT = { mid: '', 'left-mid': '', 'mid-mid': '', 'right-mid': '' };

/**
 * A cli-table3 table with a header row and plain borders, so that it pastes well into tickets. Control
 * characters in cells are written out by {@link printable}.
 */
export function table(head: string[], rows: (string | number)[][]): string {
  const t = new Table({ head, chars: COMPACT, style: { head: [], border: [] } });
  t.push(...rows.map((r) => r.map((cell) => printable(String(cell)))));
  return t.toString();
}

/** A two-column field and value table for one record, control characters written out by {@link printable}. */
export function fieldTable(fields: [string, string | number][]): string {
  const t = new Table({
    chars: COMPACT,
    style: { head: [], border: [] },
    wordWrap: true,
    colWidths: [22, 78],
  });
  t.push(...fields.map(([name, value]) => ({ [name]: printable(String(value)) })));
  return t.toString();
}
