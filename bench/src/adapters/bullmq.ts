import { randomUUID } from 'node:crypto';
import { idempotentProcessor } from '@idempotent-consumer/bullmq';
import type { Idempotency } from '@idempotent-consumer/core';
import { connectionOf } from '@idempotent-consumer/demo/dist/brokers/bullmq';
import { type Processor, Queue, Worker } from 'bullmq';
import type { BareScripts } from '../bare-scripts';
import { BUSY } from '../contender';
import type { CpuMeter } from '../cpu-meter';
import { redisUrl } from '../redis';
import { type AdapterRow, row, settleCounter } from './adapter-row';

const CONCURRENCY = 64;

/**
 * BullMQ on the bench's Redis (`REDIS_URL`), which is also the records' and the broker's, so its CPU time
 * is the Redis column: `messages` jobs (with a `jobId`) in each of three fresh queues, drained by a
 * `Worker` of concurrency 64: a no-op processor the first, the same with `scripts` claiming (the data's
 * JSON fingerprinted, as the adapter's default) and completing each job around it (key: its `jobId`) the
 * second, `idempotentProcessor` with the same no-op handler the third.
 */
export async function benchBullmq(
  idempotency: Idempotency,
  scripts: BareScripts,
  messages: number,
  meter: CpuMeter,
): Promise<AdapterRow> {
  const connection = connectionOf(redisUrl);
  const prefix = `bench-bull-${process.pid}-${randomUUID().slice(0, 8)}`;
  const queues = ['bare', 'scripts', 'sdk'].map((name) => new Queue(name, { connection, prefix }));
  try {
    for (const queue of queues) {
      for (let i = 0; i < messages; i += 1000) {
        const count = Math.min(1000, messages - i);
        await queue.addBulk(
          Array.from({ length: count }, (_, j) => ({
            name: 'job',
            data: { n: i + j },
            opts: { jobId: `${prefix}-${queue.name}-${i + j}`, removeOnComplete: true },
          })),
        );
      }
    }
    const drain = async (queue: Queue, processor: Processor) => {
      const counter = settleCounter(messages, meter);
      const worker = new Worker(queue.name, processor, { connection, prefix, concurrency: CONCURRENCY });
      worker.on('completed', () => counter.settled());
      worker.on('failed', (_, error) => counter.fail(error));
      try {
        return await counter.done;
      } finally {
        await worker.close();
      }
    };
    const bare = await drain(queues[0]!, async () => {});
    const withScripts = await drain(queues[1]!, async (job) => {
      if ((await scripts.process(job.id!, async () => {}, JSON.stringify(job.data))) === BUSY) {
        throw new Error(`the claim of ${job.id} was not ACQUIRED`);
      }
    });
    const processor = idempotentProcessor({ idempotency, logger: false }, {}, async () => {});
    const sdk = await drain(queues[2]!, processor);
    processor.close();
    return row('BullMQ', `concurrency ${CONCURRENCY}`, messages, { bare, scripts: withScripts, sdk });
  } finally {
    for (const queue of queues) {
      await queue.obliterate({ force: true }).catch(() => {});
      await queue.close().catch(() => {});
    }
  }
}
