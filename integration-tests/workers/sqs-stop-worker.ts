/**
 * Child process of src/sqs/poller-stop.test.ts: an IdempotentSqsPoller whose handler completes at once,
 * its `DeleteMessageBatch` sent to an endpoint that never answers (HOLE_ENDPOINT; the rest to the emulator).
 * On SIGTERM it shuts down as a service does: `await poller.stop()`, quits Redis, prints STOPPED, and
 * leaves the process to exit once nothing is left in its event loop (no `process.exit`).
 * Env: REDIS_URL, SQS_ENDPOINT, HOLE_ENDPOINT, QUEUE_URL, KEY_PREFIX.
 */
import { DeleteMessageBatchCommand } from '@aws-sdk/client-sqs';
import { Idempotency, RedisIdempotencyStore } from '@idempotent-consumer/core';
import { IdempotentSqsPoller } from '@idempotent-consumer/sqs';
import Redis from 'ioredis';
import { blackHoling, sqsClient } from '../support/sqs-helpers';
import { requiredEnv } from './env';

const env = requiredEnv;

const redis = new Redis(env('REDIS_URL'));
const store = new RedisIdempotencyStore({ redis }, { keyPrefix: env('KEY_PREFIX') });
const idempotency = new Idempotency({ store, logger: false }, { leaseMs: 3000 });
const sqs = blackHoling(
  sqsClient(env('SQS_ENDPOINT')),
  sqsClient(env('HOLE_ENDPOINT')),
  DeleteMessageBatchCommand,
);
const poller = new IdempotentSqsPoller(
  { idempotency, sqs, logger: false },
  { queueUrl: env('QUEUE_URL'), waitTimeSeconds: 1, stopTimeoutMs: 500 },
  () => 1,
);
process.once('SIGTERM', async () => {
  const { abandoned } = await poller.stop();
  await redis.quit();
  process.stdout.write(`STOPPED ${abandoned}\n`);
});
poller.start();
