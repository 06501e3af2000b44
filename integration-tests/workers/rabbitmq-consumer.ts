/**
 * A consumer process for the SIGKILL tests (integration-tests/src/rabbitmq/process-kill.test.ts), run with
 * `node --import tsx`. It imports the packages by name (their dist/, so build first) and reports on stdout,
 * one JSON object per line: `ready`, `in-handler` (inside the handler, before the side effect),
 * `completed` (COMPLETED written, before the ack).
 *
 * Environment: AMQP_URL, REDIS_URL, QUEUE, KEY_PREFIX, EFFECTS_KEY, LEASE_MS, and MODE:
 * - `hang-in-handler`: the handler reports `in-handler` and then waits (the test kills it there);
 * - `freeze-after-complete`: the handler does its side effect; once COMPLETED is written the process
 *   blocks its event loop, so the ack never leaves (the test kills it there).
 */
import { Idempotency, RedisIdempotencyStore } from '@idempotent-consumer/core';
import { createIdempotentConsumer } from '@idempotent-consumer/rabbitmq';
import { connect } from 'amqplib';
import Redis from 'ioredis';

function env(name: string): string {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is required`);
  return value;
}

const say = (event: Record<string, unknown>) => process.stdout.write(`${JSON.stringify(event)}\n`);

async function main(): Promise<void> {
  const mode = env('MODE');
  const redis = new Redis(env('REDIS_URL'));
  const connection = await connect(env('AMQP_URL'));
  const idempotency = new Idempotency(
    { store: new RedisIdempotencyStore({ redis }, { keyPrefix: env('KEY_PREFIX') }) },
    { leaseMs: Number(env('LEASE_MS')) },
  );
  if (mode === 'freeze-after-complete') {
    idempotency.on('completed', ({ key }) => {
      say({ event: 'completed', key });
      // Block the event loop: the ack that would follow is never written to the socket.
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 60_000);
    });
  }
  const consumer = createIdempotentConsumer(
    { idempotency, connection },
    { queue: env('QUEUE'), delayTiersMs: [100, 300, 1000], prefetch: 1 },
    async ({ key, fencingToken, signal }) => {
      say({ event: 'in-handler', key, fencingToken });
      if (mode === 'hang-in-handler') {
        await new Promise((resolve) => setTimeout(resolve, 60_000));
        signal.throwIfAborted();
      }
      await redis.hincrby(env('EFFECTS_KEY'), key!, 1);
    },
  );
  await consumer.start();
  say({ event: 'ready' });
}

main().catch((error) => {
  process.stderr.write(`rabbitmq worker failed: ${(error as Error).stack}\n`);
  process.exit(1);
});
