import { spawn } from 'node:child_process';
import { createServer } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import Redis from 'ioredis';

/** A throwaway `redis-server` (no persistence) that only this bench writes to. */
export interface PrivateRedis {
  readonly url: string;
  stop(): Promise<void>;
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
 * @throws Error when `redis-server` is not installed or does not answer within 10 s.
 */
export async function startPrivateRedis(): Promise<PrivateRedis> {
  const port = await freePort();
  const child = spawn(
    'redis-server',
    ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'],
    {
      stdio: 'ignore',
    },
  );
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.once('error', () => {});
  const url = `redis://127.0.0.1:${port}`;
  const stop = async () => {
    child.kill('SIGKILL');
    await exited;
  };
  for (let waited = 0; waited < 10_000; waited += 50) {
    const probe = new Redis(url, { lazyConnect: true, retryStrategy: () => null, maxRetriesPerRequest: 0 });
    probe.on('error', () => {});
    const ok = await probe.connect().then(
      () => probe.ping().then(() => true),
      () => false,
    );
    probe.disconnect();
    if (ok) return { url, stop };
    if (child.exitCode !== null) break;
    await sleep(50);
  }
  await stop();
  throw new Error(`redis-server did not answer on port ${port}`);
}
