import { PassThrough } from 'node:stream';
import { runCli } from '@idempotent-consumer/cli';

/** What one in-process run of the CLI printed and its exit status. */
export interface CliRun {
  readonly status: number;
  readonly stdout: string;
  readonly stderr: string;
  /** stdout parsed as JSON (for `--json` runs). */
  json<T = Record<string, unknown>>(): T;
}

/**
 * Runs `idempotent-consumer <args>` in-process against `url`, with `answer` typed on stdin when given
 * (stdin is then a terminal for the CLI), otherwise a non-interactive stdin. `answer` may be a function:
 * it is called once the confirmation prompt (`[y/N]`) is on stderr, so a test can change the record while
 * the operator reads it, and what it resolves with is typed then.
 */
export async function cli(
  url: string,
  args: string[],
  answer?: string | (() => Promise<string>),
): Promise<CliRun> {
  const stdout = new PassThrough();
  const stderr = new PassThrough();
  const stdin = new PassThrough();
  const chunks = { out: [] as Buffer[], err: [] as Buffer[] };
  stdout.on('data', (c: Buffer) => chunks.out.push(c));
  stderr.on('data', (c: Buffer) => chunks.err.push(c));
  if (typeof answer === 'string') stdin.end(answer);
  if (typeof answer === 'function') {
    let asked = false;
    stderr.on('data', () => {
      if (asked || !Buffer.concat(chunks.err).toString().includes('[y/N]')) return;
      asked = true;
      answer().then(
        (text) => stdin.end(text),
        (error: unknown) => stdin.destroy(error as Error),
      );
    });
  }
  const status = await runCli(['--url', url, ...args], {
    stdout,
    stderr,
    stdin,
    interactive: answer !== undefined,
    env: {},
  });
  const text = { out: Buffer.concat(chunks.out).toString(), err: Buffer.concat(chunks.err).toString() };
  return {
    status,
    stdout: text.out,
    stderr: text.err,
    json: <T>() => JSON.parse(text.out) as T,
  };
}
