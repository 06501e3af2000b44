/**
 * Child process of src/sqs/poller-kill.test.ts: an IdempotentSqsPoller whose handler prints IN_HANDLER and
 * then never returns (its side effect would come after), so the test can SIGKILL it mid-handler.
 * Env: REDIS_URL, SQS_ENDPOINT, QUEUE_URL, KEY_PREFIX, LEASE_MS.
 */
import { Idempotency, RedisIdempotencyStore } from '@idempotent-consumer/core';
import { IdempotentSqsPoller } from '@idempotent-consumer/sqs';
import Redis from 'ioredis';
import { sqsClient } from '../support/sqs-helpers';
import { requiredEnv } from './env';

const env = requiredEnv;

const redis = new Redis(env('REDIS_URL'));
const store = new RedisIdempotencyStore({ redis }, { keyPrefix: env('KEY_PREFIX') });
const idempotency = new Idempotency({ store }, { leaseMs: Number(env('LEASE_MS')) });
const poller = new IdempotentSqsPoller(
  { idempotency, sqs: sqsClient(env('SQS_ENDPOINT')) },
  { queueUrl: env('QUEUE_URL'), waitTimeSeconds: 1, concurrency: 1 },
  async ({ fencingToken }) => {
    process.stdout.write(`IN_HANDLER ${fencingToken}\n`);
    await new Promise(() => {}); // hangs until SIGKILL
  },
);
poller.start();
