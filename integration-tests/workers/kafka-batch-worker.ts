/**
 * A consumer process for kafka/interruptions.test.ts: consumes a topic with idempotentEachBatch, charges
 * each payment in a Redis ledger (HINCRBY), counts dead letters in Redis, and SIGKILLs itself when its
 * handler starts for the `IC_KILL_AT`-th time, before that message's side effect: a crash in the middle of
 * a batch, with the rest of the batch claimed and not run. Env: IC_REDIS, IC_PREFIX, IC_BROKERS, IC_GROUP,
 * IC_TOPIC, IC_LEDGER, IC_DEAD, IC_MAX_ATTEMPTS, IC_KILL_AT.
 */
import { Idempotency, RedisIdempotencyStore } from '@idempotent-consumer/core';
import { idempotentEachBatch } from '@idempotent-consumer/kafka';
import Redis from 'ioredis';
import { FAST_CONSUMER, kafkaClient } from '../support/kafka-fixture';
import { requiredEnv } from './env';

const env = requiredEnv;

async function main(): Promise<void> {
  const redis = new Redis(env('IC_REDIS'), { enableAutoPipelining: true });
  const store = new RedisIdempotencyStore({ redis }, { keyPrefix: env('IC_PREFIX') });
  const idempotency = new Idempotency(
    { store },
    { leaseMs: 3000, retentionMs: 600_000, maxAttempts: Number(env('IC_MAX_ATTEMPTS')) },
  );
  const kafka = kafkaClient(env('IC_BROKERS'), 'batch-worker');
  const groupId = env('IC_GROUP');
  const consumer = kafka.consumer({ groupId, ...FAST_CONSUMER });
  await consumer.connect();
  await consumer.subscribe({ topic: env('IC_TOPIC'), fromBeginning: true });
  const killAt = Number(env('IC_KILL_AT'));
  let started = 0;
  const eachBatch = idempotentEachBatch(
    { idempotency, consumer },
    { groupId, deadLetterTopic: false },
    async ({ key = '' }) => {
      started += 1;
      if (started === killAt) {
        process.stdout.write(`killing at ${key}\n`);
        process.kill(process.pid, 'SIGKILL');
      }
      await redis.hincrby(env('IC_LEDGER'), key, 1);
    },
  );
  eachBatch.events.on('deadLettered', ({ source }) => {
    void redis.hincrby(env('IC_DEAD'), `${source.partition}:${source.offset}`, 1);
  });
  await consumer.run({ eachBatchAutoResolve: false, eachBatch });
  process.stdout.write('ready\n');
}

main().catch((error: Error) => {
  process.stderr.write(`${error.stack}\n`);
  process.exit(1);
});
