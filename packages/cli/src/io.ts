import type { Readable, Writable } from 'node:stream';

/**
 * Where a CLI run reads and writes: the process's streams in `bin.ts`, buffers in tests. `interactive` is
 * whether a person can answer a confirmation (stdin is a terminal).
 */
export interface CliIo {
  readonly stdout: Writable;
  readonly stderr: Writable;
  readonly stdin: Readable;
  readonly interactive: boolean;
  /** The environment the defaults are read from (`REDIS_URL`). */
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
   * Nothing to do: no such record, a key that is not a record (another program's, not a hash), or a record
   * not in a state the command changes.
   */
  nothingDone: 3,
  /**
   * The output was cut: stdout closed before the report of a `release` or `purge` that changed records was
   * written whole (its reader went away; one that changed nothing keeps its own status), or a write to
   * stdout failed (the reason on stderr). What the command changed stays
   * changed. 141 is 128 + SIGPIPE, what a shell reports for a command that a closed pipe ended. A read-only
   * command (`inspect`, `list`, `stats`) whose reader went away (`| head -1`) stops quietly with its own
   * status instead.
   */
  outputCut: 141,
} as const;
