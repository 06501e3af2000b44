/**
 * A BullMQ worker process for the SIGKILL tests (integration-tests/src/bullmq/process-kill.test.ts), run
 * with `node --import tsx`. It imports the packages by name (their dist/, so build first) and reports on
 * stdout, one JSON object per line: `ready`, `in-handler` (its first job, where it stops), `completed`.
 *
 * Environment: REDIS_URL, BULL_PREFIX, QUEUE, KEY_PREFIX, EFFECTS_KEY, LEASE_MS, and MODE for its first job:
 * - `hang-before-effect`: the handler reports `in-handler` and waits (the test kills it there);
 * - `hang-after-effect`: the handler does its side effect, reports `in-handler` and waits;
 * - `freeze-after-complete`: the handler does its side effect; once COMPLETED is written the process blocks
 *   its event loop, so the processor never returns to BullMQ (the test kills it there).
 */
import { idempotentProcessor } from '@idempotent-consumer/bullmq';
import { Idempotency, RedisIdempotencyStore } from '@idempotent-consumer/core';
import { connectionOf } from '@idempotent-consumer/demo/dist/brokers/bullmq';
import { Worker } from 'bullmq';
import Redis from 'ioredis';
import { FAST_WORKER } from '../src/bullmq/fixture';
import { requiredEnv as env } from './env';

const say = (event: Record<string, unknown>) => process.stdout.write(`${JSON.stringify(event)}\n`);

const mode = env('MODE');
const redis = new Redis(env('REDIS_URL'));
const idempotency = new Idempotency(
  { store: new RedisIdempotencyStore({ redis }, { keyPrefix: env('KEY_PREFIX') }), logger: false },
  { leaseMs: Number(env('LEASE_MS')) },
);
let first: string | undefined;
if (mode === 'freeze-after-complete') {
  idempotency.on('completed', ({ key }) => {
    if (key !== first) return;
    say({ event: 'completed', key });
    // Block the event loop: the processor's return never reaches BullMQ.
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 60_000);
  });
}
const processor = idempotentProcessor({ idempotency, logger: false }, {}, async ({ key, fencingToken }) => {
  first ??= key;
  const victim = key === first;
  if (victim && mode === 'hang-before-effect') {
    say({ event: 'in-handler', key, fencingToken });
    await new Promise(() => {});
  }
  await redis.hincrby(env('EFFECTS_KEY'), key!, 1);
  if (victim && mode === 'hang-after-effect') {
    say({ event: 'in-handler', key, fencingToken });
    await new Promise(() => {});
  }
  return { charged: key };
});
const worker = new Worker(env('QUEUE'), processor, {
  connection: connectionOf(env('REDIS_URL')),
  prefix: env('BULL_PREFIX'),
  concurrency: 1,
  ...FAST_WORKER,
});
processor.attach(worker);
worker.on('error', () => {});
void worker.waitUntilReady().then(() => say({ event: 'ready' }));
