import { spawn } from 'node:child_process';
import { createServer } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import Redis from 'ioredis';

/** A throwaway `redis-server` (no persistence) that only this bench writes to. */
export interface PrivateRedis {
  readonly url: string;
  /** The server's process id (under a `wrapper`, the wrapper's, which runs the server in its process). */
  readonly pid: number;
  stop(): Promise<void>;
}

/** How to start the server: `wrapper` is a command that runs it (`['valgrind', '--tool=callgrind']`). */
export interface PrivateRedisOptions {
  readonly wrapper?: readonly string[];
  /** How long to wait for its first `PING` answer, in milliseconds (default 10,000). */
  readonly startTimeoutMs?: number;
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer().once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

/**
 * Starts `redis-server` on a free port of 127.0.0.1, so that `INFO used_memory` counts this bench's keys
 * alone (the shared server's other tenants would blur it) and FLUSHDB is allowed.
 * @throws Error when `redis-server` (or the wrapper) is not installed or does not answer in time.
 */
export async function startPrivateRedis(options: PrivateRedisOptions = {}): Promise<PrivateRedis> {
  const port = await freePort();
  const argv = [
    ...(options.wrapper ?? []),
    'redis-server',
    '--port',
    String(port),
    '--bind',
    '127.0.0.1',
    '--save',
    '',
    '--appendonly',
    'no',
  ];
  const child = spawn(argv[0]!, argv.slice(1), { stdio: 'ignore' });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.once('error', () => {});
  const url = `redis://127.0.0.1:${port}`;
  const stop = async () => {
    child.kill('SIGKILL');
    await exited;
  };
  for (let waited = 0; waited < (options.startTimeoutMs ?? 10_000); waited += 50) {
    const probe = new Redis(url, { lazyConnect: true, retryStrategy: () => null, maxRetriesPerRequest: 0 });
    probe.on('error', () => {});
    const ok = await probe.connect().then(
      () => probe.ping().then(() => true),
      () => false,
    );
    probe.disconnect();
    if (ok) return { url, pid: child.pid!, stop };
    if (child.exitCode !== null) break;
    await sleep(50);
  }
  await stop();
  throw new Error(`redis-server did not answer on port ${port}`);
}
