/**
 * The demo on RabbitMQ: the producer publishes payment messages to a work queue (AMQP `message-id` =
 * idempotency key); each consumer process consumes it with `@idempotent-consumer/rabbitmq` (`sdk`) or
 * with plain amqplib, acking after the charge (`naive`).
 */

import { redactUrl } from '@idempotent-consumer/core/tools';
import { createIdempotentConsumer, type RabbitMqIdempotencyOptions } from '@idempotent-consumer/rabbitmq';
import { consumerTopology } from '@idempotent-consumer/rabbitmq/topology';
import { type ChannelModel, type ConfirmChannel, type ConsumeMessage, connect } from 'amqplib';
import type { DemoBroker, DemoConsumerContext, DemoMode, PaymentMessage } from '../broker';

/** Where RabbitMQ is: `AMQP_URL`, else the local default. */
const amqpUrl = () => process.env.AMQP_URL ?? 'amqp://guest:guest@127.0.0.1:5672';

/**
 * The consumer settings of the demo: delay tiers fine enough for a lease of a few seconds, so that a
 * CONFLICT (the SIGKILLed consumer's lease still running) comes back shortly after the lease ends.
 */
function consumerOptions(queue: string): RabbitMqIdempotencyOptions {
  return {
    queue,
    prefetch: 8,
    delayTiersMs: [250, 500, 1000, 2000, 3000, 5000],
    retryBackoff: { baseMs: 250, factor: 2, maxMs: 2000, jitter: 'full' },
  };
}

/** Every queue and exchange of one run: the work queue, its delay tiers, the dead-letter exchange and queue. */
function runResources(queue: string): { queues: string[]; exchanges: string[] } {
  const topology = consumerTopology(consumerOptions(queue));
  return {
    queues: [
      queue,
      ...topology.delayTiers.map((t) => t.queue),
      ...(topology.deadLetterQueue ? [topology.deadLetterQueue] : []),
    ],
    exchanges: [topology.deadLetterExchange],
  };
}

const parse = (message: ConsumeMessage) => JSON.parse(message.content.toString('utf8')) as PaymentMessage;

/** The producer side: creates the work queue per run, publishes with publisher confirms. */
export function rabbitmqBroker(): DemoBroker {
  let connection: ChannelModel | undefined;
  let channel: ConfirmChannel | undefined;
  let queue: string | undefined;

  const open = async (): Promise<ConfirmChannel> => {
    if (channel) return channel;
    connection = await connect(amqpUrl());
    connection.on('error', () => {});
    channel = await connection.createConfirmChannel();
    channel.on('error', () => {});
    return channel;
  };

  return {
    name: 'rabbitmq',
    async preflight() {
      try {
        await open();
        return null;
      } catch (error) {
        return `RabbitMQ is not reachable at ${redactUrl(amqpUrl())} (${(error as Error).message}); start it with \`rabbitmq-server -detached\` or set AMQP_URL`;
      }
    },
    async setup(runId: string, _mode: DemoMode) {
      const ch = await open();
      queue = `demo.${runId}.payments`;
      await ch.assertQueue(queue, { durable: true });
      return { amqpUrl: amqpUrl(), queue };
    },
    async publish(messages: readonly PaymentMessage[]) {
      const ch = await open();
      if (!queue) throw new Error('setup() first');
      for (const message of messages) {
        ch.sendToQueue(queue, Buffer.from(JSON.stringify(message)), {
          messageId: message.idempotencyKey,
          contentType: 'application/json',
          persistent: true,
        });
      }
      await ch.waitForConfirms();
    },
    async teardown() {
      if (!queue || !connection) return;
      const { queues, exchanges } = runResources(queue);
      queue = undefined;
      const scratch = await connection.createChannel();
      scratch.on('error', () => {});
      for (const q of queues) await scratch.deleteQueue(q).catch(() => {});
      for (const e of exchanges) await scratch.deleteExchange(e).catch(() => {});
      await scratch.close().catch(() => {});
    },
    async close() {
      const c = connection;
      connection = undefined;
      channel = undefined;
      await c?.close().catch(() => {});
    },
  };
}

/** The consumer side, in one consumer process. */
export async function startConsumer(context: DemoConsumerContext): Promise<{ stop(): Promise<void> }> {
  const url = context.config.amqpUrl ?? amqpUrl();
  const queue = context.config.queue;
  if (!queue) throw new Error('The rabbitmq demo consumer needs config.queue');
  const connection = await connect(url);
  connection.on('error', () => {});
  const { counters } = context;

  if (context.mode === 'sdk') {
    if (!context.idempotency) throw new Error('sdk mode needs context.idempotency');
    const consumer = createIdempotentConsumer(
      { idempotency: context.idempotency, connection },
      consumerOptions(queue),
      async ({ message, fencingToken }) => {
        await context.charge(parse(message), fencingToken);
      },
    );
    consumer.on('delivery', () => counters.deliveries++);
    consumer.on('deadLettered', () => counters.deadLettered++);
    await consumer.start();
    return {
      async stop() {
        await consumer.stop();
        await connection.close().catch(() => {});
      },
    };
  }

  // naive: plain amqplib, ack after the charge, requeue at once on an error.
  const channel = await connection.createChannel();
  channel.on('error', () => {});
  await channel.prefetch(8);
  const inFlight = new Set<Promise<void>>();
  const { consumerTag } = await channel.consume(queue, (message) => {
    if (!message) return;
    counters.deliveries++;
    const task = context
      .charge(parse(message))
      .then(
        () => channel.ack(message),
        () => channel.nack(message, false, true),
      )
      .catch(() => {
        // The channel closed: RabbitMQ requeues the message.
      });
    inFlight.add(task);
    void task.finally(() => inFlight.delete(task));
  });
  return {
    async stop() {
      await channel.cancel(consumerTag).catch(() => {});
      await Promise.allSettled([...inFlight]);
      await connection.close().catch(() => {});
    },
  };
}
