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
 * (stdin is then a terminal for the CLI), otherwise a non-interactive stdin.
 */
export async function cli(url: string, args: string[], answer?: string): Promise<CliRun> {
  const stdout = new PassThrough();
  const stderr = new PassThrough();
  const stdin = new PassThrough();
  const chunks = { out: [] as Buffer[], err: [] as Buffer[] };
  stdout.on('data', (c: Buffer) => chunks.out.push(c));
  stderr.on('data', (c: Buffer) => chunks.err.push(c));
  if (answer !== undefined) stdin.end(answer);
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
