/**
 * One holder for the lost-record suite (integration-tests/src/core/lost-record.test.ts). Started with
 * `node --import tsx`; runs `Idempotency.run` on one key and talks to the suite over IPC:
 *   worker → {type:'running', fencingToken, attempt} once its handler runs (it then holds the claim);
 *   suite  → {type:'finish'} lets the handler return its name;
 *   worker → {type:'done', status, recorded, fencingToken} with how the run ended.
 */
import Redis from 'ioredis';
import { Idempotency, RedisIdempotencyStore } from '../../packages/core/src';

export interface FenceWorkerConfig {
  readonly url: string;
  readonly prefix: string;
  readonly key: string;
  /** Returned by the handler and stored as the result. */
  readonly name: string;
}

export type FenceWorkerMessage =
  | { type: 'running'; fencingToken: number; attempt: number }
  | { type: 'done'; status: string; recorded: boolean | null; fencingToken: number }
  | { type: 'error'; message: string };

const config = JSON.parse(process.env.FENCE_WORKER_CONFIG ?? '{}') as FenceWorkerConfig;
const send = (message: FenceWorkerMessage) => process.send!(message);

async function main(): Promise<void> {
  const redis = new Redis(config.url, { retryStrategy: () => 50, maxRetriesPerRequest: 1 });
  const store = new RedisIdempotencyStore({ redis }, { keyPrefix: config.prefix, commandTimeoutMs: 500 });
  // A long lease: the holder is alive and still holds its claim when the record is lost.
  const idempotency = new Idempotency({ store }, { leaseMs: 30_000, writeAttempts: 20 });
  const finish = new Promise<void>((resolve) =>
    process.on('message', (m: { type: string }) => m.type === 'finish' && resolve()),
  );
  const result = await idempotency.run({ scope: 'fence', key: config.key }, async (ctx) => {
    send({ type: 'running', fencingToken: ctx.fencingToken, attempt: ctx.attempt });
    await finish;
    return config.name;
  });
  send({
    type: 'done',
    status: 'status' in result ? result.status : result.outcome,
    recorded: 'recorded' in result ? result.recorded : null,
    fencingToken: 'fencingToken' in result ? result.fencingToken : 0,
  });
  redis.disconnect();
}

main().catch((error: unknown) => {
  send({ type: 'error', message: String((error as Error)?.stack ?? error) });
  process.exitCode = 1;
});
