/**
 * A child process for the HTTP SIGKILL suite: one framework's test server (src/http/servers.ts) on real
 * Redis, whose handler for the `HOLD_KEY` request never returns. Prints `{"event":"ready","url":...}`, then
 * `{"event":"entered"}` once that handler runs; the suite then kills it with SIGKILL.
 */
import { Idempotency, RedisIdempotencyStore } from '@idempotent-consumer/core';
import Redis from 'ioredis';
import { FRAMEWORKS } from '../src/http/servers';
import { requiredEnv } from './env';

async function main(): Promise<void> {
  const framework = requiredEnv('FRAMEWORK');
  const start = FRAMEWORKS.find(([name]) => name === framework)?.[1];
  if (!start) throw new Error(`unknown FRAMEWORK ${framework}`);
  const redis = new Redis(requiredEnv('REDIS_URL'));
  const store = new RedisIdempotencyStore({ redis }, { keyPrefix: requiredEnv('KEY_PREFIX') });
  const idempotency = new Idempotency({ store, logger: false }, { leaseMs: Number(requiredEnv('LEASE_MS')) });
  const server = await start(idempotency);
  const held = server.hold(requiredEnv('HOLD_KEY'));
  const print = (event: Record<string, unknown>) => process.stdout.write(`${JSON.stringify(event)}\n`);
  void held.entered.then(() => print({ event: 'entered' }));
  print({ event: 'ready', url: server.url });
}

main().catch((error: unknown) => {
  process.stderr.write(`${(error as Error).stack ?? String(error)}\n`);
  process.exit(1);
});
