import { randomUUID } from 'node:crypto';
import type { Idempotency } from '@idempotent-consumer/core';
import { createIdempotentConsumer } from '@idempotent-consumer/rabbitmq';
import { consumerTopology } from '@idempotent-consumer/rabbitmq/topology';
import { type ConsumeMessage, connect } from 'amqplib';
import type { BareScripts } from '../bare-scripts';
import { BUSY } from '../contender';
import { type CpuMeter, findProcess } from '../cpu-meter';
import { type AdapterRow, row, settleCounter } from './adapter-row';

const PREFETCH = 64;

/**
 * RabbitMQ (`AMQP_URL`, else 127.0.0.1:5672): `messages` persistent messages in each of three fresh
 * queues; amqplib alone (prefetch 64, ack after a no-op handler) drains the first, the same loop with
 * `scripts` claiming (with the body's fingerprint, as the adapter's default) and completing each
 * message around the handler (key: its `messageId`) the second,
 * `createIdempotentConsumer` (prefetch 64, the same no-op handler) the third. `meter` reads the broker's
 * CPU time too when the server is the local one (its Erlang VM, `beam.smp`).
 */
export async function benchRabbitmq(
  idempotency: Idempotency,
  scripts: BareScripts,
  messages: number,
  meter: CpuMeter,
): Promise<AdapterRow> {
  const url = process.env.AMQP_URL ?? 'amqp://guest:guest@127.0.0.1:5672';
  const local = ['127.0.0.1', 'localhost', '[::1]'].includes(new URL(url).hostname);
  meter = meter.withBroker(local ? findProcess('beam.smp') : undefined);
  const connection = await connect(url);
  connection.on('error', () => {});
  const run = `bench.${process.pid}.${randomUUID().slice(0, 8)}`;
  const queues = { bare: `${run}.bare`, scripts: `${run}.scripts`, sdk: `${run}.sdk` };
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

    // amqplib alone: ack after `handle` resolves, prefetch 64.
    const drain = async (queue: string, handle: (message: ConsumeMessage) => Promise<unknown>) => {
      const channel = await connection.createChannel();
      await channel.prefetch(PREFETCH);
      const counter = settleCounter(messages, meter);
      const { consumerTag } = await channel.consume(queue, (message) => {
        if (!message) return;
        handle(message).then(
          () => {
            channel.ack(message);
            counter.settled();
          },
          (error: Error) => counter.fail(error),
        );
      });
      const settled = await counter.done;
      await channel.cancel(consumerTag);
      await channel.close();
      return settled;
    };
    const bareSettled = await drain(queues.bare, async () => {});
    const scriptsSettled = await drain(queues.scripts, async (message) => {
      const key = message.properties.messageId as string;
      if ((await scripts.process(key, async () => {}, message.content)) === BUSY) {
        throw new Error(`the claim of ${key} was not ACQUIRED`);
      }
    });

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
    return row('RabbitMQ', `prefetch ${PREFETCH}`, messages, {
      bare: bareSettled,
      scripts: scriptsSettled,
      sdk: sdkSettled,
    });
  } finally {
    await connection.close().catch(() => {});
  }
}
