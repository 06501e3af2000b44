/**
 * A consumer process for the kill test: consumes a topic with idempotentEachMessage, charges each payment
 * in a Redis ledger (HINCRBY), prints `completed <key>` once the record is COMPLETED, and never commits
 * offsets (`autoCommit: false`: KafkaJS commits after every batch otherwise), so a SIGKILL lands after completing but before
 * committing. Settings come from the environment (see kafka/kill.test.ts).
 */
import { Idempotency, RedisIdempotencyStore } from '@idempotent-consumer/core';
import { idempotentEachMessage } from '@idempotent-consumer/kafka';
import Redis from 'ioredis';
import { Kafka, logLevel } from 'kafkajs';
import { requiredEnv } from './env';

const env = requiredEnv;

async function main(): Promise<void> {
  const redis = new Redis(env('IC_REDIS'), { enableAutoPipelining: true });
  const store = new RedisIdempotencyStore({ redis }, { keyPrefix: env('IC_PREFIX') });
  const idempotency = new Idempotency({ store }, { leaseMs: 3000, retentionMs: 600_000 });
  idempotency.on('completed', ({ key }) => process.stdout.write(`completed ${key}\n`));
  const kafka = new Kafka({
    clientId: 'kill-worker',
    brokers: env('IC_BROKERS').split(','),
    logLevel: logLevel.NOTHING,
  });
  const groupId = env('IC_GROUP');
  const topic = env('IC_TOPIC');
  const consumer = kafka.consumer({
    groupId,
    sessionTimeout: 3000,
    rebalanceTimeout: 3000,
    heartbeatInterval: 300,
    maxWaitTimeInMs: 50,
  });
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  await consumer.run({
    autoCommit: false, // KafkaJS would otherwise commit after every batch
    eachMessage: idempotentEachMessage(
      { idempotency, consumer },
      { groupId, deadLetterTopic: false },
      async ({ key = '' }) => {
        await redis.hincrby(env('IC_LEDGER'), key, 1);
      },
    ),
  });
  process.stdout.write('ready\n');
}

main().catch((error: Error) => {
  process.stderr.write(`${error.stack}\n`);
  process.exit(1);
});
