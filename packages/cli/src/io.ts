import type { Readable, Writable } from 'node:stream';

/**
 * Where a CLI run reads and writes. The process's streams in `bin.ts`, buffers in tests. `interactive` is
 * whether a person can answer a confirmation, that is, whether stdin is a terminal.
 */
export interface CliIo {
  readonly stdout: Writable;
  readonly stderr: Writable;
  readonly stdin: Readable;
  readonly interactive: boolean;
  /** The environment the defaults are read from, such as `REDIS_URL`. */
  readonly env: Readonly<Record<string, string | undefined>>;
}

/** The process's own streams and environment. */
export function processIo(): CliIo {
  return {
    stdout: process.stdout,
    stderr: process.stderr,
    stdin: process.stdin,
    interactive: Boolean(process.stdin.isTTY),
    env: process.env,
  };
}

/** Exit statuses of the `idempotent-consumer` command. */
export const EXIT = {
  /** Done. */
  ok: 0,
  /** Redis failed or answered something unexpected. */
  error: 1,
  /** Bad usage, or a change was not confirmed. */
  usage: 2,
  /**
   * Nothing to do. No such record, a key that is not a record because another program keeps another type
   * there, or a record not in a state the command changes.
   */
  nothingDone: 3,
  /**
   * The output was cut. Either stdout closed before the report of a `release` or `purge` that changed records
   * was written whole, or a write to stdout failed, with the reason on stderr. A command that changed nothing
   * keeps its own status. What the command changed stays changed. 141 is 128 + SIGPIPE, what a shell reports
   * for a command that a closed pipe ended. A read-only command such as `inspect`, `list` or `stats` whose
   * reader went away stops quietly with its own status instead.
   */
  outputCut: 141,
} as const;
