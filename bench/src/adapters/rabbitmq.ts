import { randomUUID } from 'node:crypto';
import type { Idempotency } from '@idempotent-consumer/core';
import { createIdempotentConsumer } from '@idempotent-consumer/rabbitmq';
import { consumerTopology } from '@idempotent-consumer/rabbitmq/topology';
import { connect } from 'amqplib';
import { type CpuMeter, findProcess } from '../cpu-meter';
import { type AdapterRow, row, settleCounter } from './adapter-row';

const PREFETCH = 64;

/**
 * RabbitMQ (`AMQP_URL`, else 127.0.0.1:5672): `messages` persistent messages in each of two fresh queues;
 * amqplib alone (prefetch 64, ack after a no-op handler) drains one, `createIdempotentConsumer` (prefetch
 * 64, the same no-op handler) the other. `meter` reads the broker's CPU time too when the server is the
 * local one (its Erlang VM, `beam.smp`).
 */
export async function benchRabbitmq(
  idempotency: Idempotency,
  messages: number,
  meter: CpuMeter,
): Promise<AdapterRow> {
  const url = process.env.AMQP_URL ?? 'amqp://guest:guest@127.0.0.1:5672';
  const local = ['127.0.0.1', 'localhost', '[::1]'].includes(new URL(url).hostname);
  meter = meter.withBroker(local ? findProcess('beam.smp') : undefined);
  const connection = await connect(url);
  connection.on('error', () => {});
  const run = `bench.${process.pid}.${randomUUID().slice(0, 8)}`;
  const queues = { bare: `${run}.bare`, sdk: `${run}.sdk` };
  const publisher = await connection.createConfirmChannel();
  try {
    for (const queue of Object.values(queues)) {
      await publisher.assertQueue(queue, { durable: true });
      for (let i = 0; i < messages; i++) {
        publisher.sendToQueue(queue, Buffer.from(`{"n":${i}}`), {
          messageId: `${run}-${i}`,
          persistent: true,
        });
      }
    }
    await publisher.waitForConfirms();

    const bareChannel = await connection.createChannel();
    await bareChannel.prefetch(PREFETCH);
    const bare = settleCounter(messages, meter);
    const { consumerTag } = await bareChannel.consume(queues.bare, (message) => {
      if (!message) return;
      void (async () => {})().then(() => {
        bareChannel.ack(message);
        bare.settled();
      });
    });
    const bareSettled = await bare.done;
    await bareChannel.cancel(consumerTag);
    await bareChannel.close();

    const sdk = settleCounter(messages, meter);
    const options = { queue: queues.sdk, prefetch: PREFETCH };
    const consumer = createIdempotentConsumer({ idempotency, connection }, options, async () => {});
    consumer.on('settled', () => sdk.settled());
    await consumer.start();
    const sdkSettled = await sdk.done;
    await consumer.stop();

    const topology = consumerTopology(options);
    for (const q of [...Object.values(queues), ...topology.delayTiers.map((t) => t.queue)]) {
      await publisher.deleteQueue(q).catch(() => {});
    }
    if (topology.deadLetterQueue) await publisher.deleteQueue(topology.deadLetterQueue).catch(() => {});
    await publisher.deleteExchange(topology.deadLetterExchange).catch(() => {});
    return row('RabbitMQ', `prefetch ${PREFETCH}`, messages, bareSettled, sdkSettled);
  } finally {
    await connection.close().catch(() => {});
  }
}
