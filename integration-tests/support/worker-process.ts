import { type ChildProcess, spawn } from 'node:child_process';

/** A test's child process running a TypeScript worker through tsx, with its output collected. */
export interface WorkerProcess {
  readonly child: ChildProcess;
  /** Everything it wrote to stdout so far. */
  stdout(): string;
  /** Everything it wrote to stderr so far. */
  stderr(): string;
  /** Resolves when it exited, with its exit code or the signal that ended it. */
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/** Starts `node --import tsx <file>` with `env` added to this process's environment. */
export function startWorker(file: string, env: Record<string, string>): WorkerProcess {
  const child = spawn(process.execPath, ['--import', 'tsx', file], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stdout!.on('data', (d: Buffer) => {
    out += d.toString();
  });
  child.stderr!.on('data', (d: Buffer) => {
    err += d.toString();
  });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => resolve({ code, signal })),
  );
  return { child, stdout: () => out, stderr: () => err, exited };
}
