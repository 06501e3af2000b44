/**
 * A consumer process for the SIGKILL tests (src/nats/process-kill.test.ts): a NatsIdempotentConsumer whose
 * handler charges each payment in a Redis ledger (HINCRBY) and prints, one line each, `in-handler <key>
 * <token>` when it starts and `completed <key>` once the record is COMPLETED. MODE `hang` never returns
 * from the handler (the test kills it there); MODE `run` returns after `HANDLER_MS`.
 * Env: NATS_URL, REDIS_URL, STREAM, DURABLE, DEAD_SUBJECT, KEY_PREFIX, LEDGER, LEASE_MS, MODE, HANDLER_MS.
 */
import { Idempotency, RedisIdempotencyStore } from '@idempotent-consumer/core';
import { NatsIdempotentConsumer } from '@idempotent-consumer/nats';
import { jetstream } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import Redis from 'ioredis';
import { requiredEnv as env } from './env';

const say = (line: string) => process.stdout.write(`${line}\n`);

async function main(): Promise<void> {
  const redis = new Redis(env('REDIS_URL'));
  const store = new RedisIdempotencyStore({ redis }, { keyPrefix: env('KEY_PREFIX') });
  const idempotency = new Idempotency({ store }, { leaseMs: Number(env('LEASE_MS')) });
  idempotency.on('completed', ({ key }) => say(`completed ${key}`));
  const nc = await connect({ servers: env('NATS_URL') });
  const hang = env('MODE') === 'hang';
  const consumer = new NatsIdempotentConsumer(
    { idempotency, jetstream: jetstream(nc), logger: false },
    {
      stream: env('STREAM'),
      consumer: env('DURABLE'),
      deadLetterSubject: env('DEAD_SUBJECT'),
      concurrency: 4,
    },
    async ({ key, fencingToken }) => {
      say(`in-handler ${key} ${fencingToken}`);
      await new Promise((resolve) =>
        setTimeout(resolve, hang ? 600_000 : Number(process.env.HANDLER_MS ?? 0)),
      );
      await redis.hincrby(env('LEDGER'), key!, 1);
    },
  );
  await consumer.start();
  say('ready');
}

main().catch((error: Error) => {
  process.stderr.write(`nats worker failed: ${error.stack}\n`);
  process.exit(1);
});
