import { TopologyMismatchError } from '@idempotent-consumer/core';
import type { AmqpConnection, ConsumeChannel } from './amqp-types';
import type { ResolvedConsumerOptions } from './options';

/** One delay tier: a queue whose messages expire after `delayMs` and dead-letter back to the work queue. */
export interface DelayTier {
  readonly delayMs: number;
  readonly queue: string;
}

/**
 * The RabbitMQ resources one consumer relies on (README, "Topology"):
 * - `queue`: the work queue (yours; checked, never declared);
 * - `delayTiers`: durable queues with `x-message-ttl = delayMs`, `x-dead-letter-exchange = ''` (the
 *   default exchange) and `x-dead-letter-routing-key = queue`, and no consumer: a message published to a
 *   tier waits `delayMs` and comes back to the work queue;
 * - `deadLetterExchange`: a durable `direct` exchange; dead-lettered messages are published to it with the
 *   work queue's name as routing key;
 * - `deadLetterQueue`: a durable queue bound to it with that key (or `false`: you bind your own).
 */
export interface ConsumerTopology {
  readonly queue: string;
  readonly delayTiers: readonly DelayTier[];
  readonly deadLetterExchange: string;
  readonly deadLetterRoutingKey: string;
  readonly deadLetterQueue: string | false;
}

/** The names of every resource of a consumer with these options. */
export function consumerTopology(options: ResolvedConsumerOptions): ConsumerTopology {
  return {
    queue: options.queue,
    delayTiers: options.delayTiersMs.map((delayMs) => ({
      delayMs,
      queue: `${options.delayQueuePrefix}.${delayMs}ms`,
    })),
    deadLetterExchange: options.deadLetterExchange,
    deadLetterRoutingKey: options.queue,
    deadLetterQueue: options.deadLetterQueue,
  };
}

/** The arguments of a delay-tier queue (the same on every declaration, so redeclaring is idempotent). */
export function delayTierArguments(tier: DelayTier, workQueue: string): Record<string, unknown> {
  return {
    'x-message-ttl': tier.delayMs,
    'x-dead-letter-exchange': '',
    'x-dead-letter-routing-key': workQueue,
  };
}

/**
 * Declares (`assert`) or checks (`check`, passive declare) the topology, on a scratch channel of its own:
 * AMQP 0-9-1 closes a channel on a failed declaration (404 NOT_FOUND, 406 PRECONDITION_FAILED), and the
 * consumer's channels must survive a failed check.
 *
 * @throws {@link TopologyMismatchError} when the work queue is missing, a resource is missing (`check`),
 *   or a resource exists with other arguments or type (`assert`: RabbitMQ answers 406 PRECONDITION_FAILED).
 */
export async function ensureTopology(
  connection: AmqpConnection,
  topology: ConsumerTopology,
  mode: 'assert' | 'check',
): Promise<void> {
  const channel = await connection.createChannel();
  let closed = false;
  channel.on('error', () => {
    // A failed declaration closes the scratch channel; the rejection of that call reports it.
  });
  channel.on('close', () => {
    closed = true;
  });
  const step = async (what: string, call: (c: ConsumeChannel) => Promise<unknown>): Promise<void> => {
    try {
      await call(channel);
    } catch (error) {
      throw new TopologyMismatchError(`${what}: ${(error as Error)?.message ?? String(error)}`, {
        cause: error,
      });
    }
  };
  try {
    await step(`The work queue "${topology.queue}" does not exist`, (c) => c.checkQueue(topology.queue));
    for (const tier of topology.delayTiers) {
      await step(
        mode === 'assert'
          ? `The delay tier "${tier.queue}" exists with other arguments`
          : `The delay tier "${tier.queue}" does not exist`,
        (c) =>
          mode === 'assert'
            ? c.assertQueue(tier.queue, {
                durable: true,
                arguments: delayTierArguments(tier, topology.queue),
              })
            : c.checkQueue(tier.queue),
      );
    }
    await step(
      mode === 'assert'
        ? `The dead-letter exchange "${topology.deadLetterExchange}" exists with another type or arguments`
        : `The dead-letter exchange "${topology.deadLetterExchange}" does not exist`,
      (c) =>
        mode === 'assert'
          ? c.assertExchange(topology.deadLetterExchange, 'direct', { durable: true })
          : c.checkExchange(topology.deadLetterExchange),
    );
    const dlq = topology.deadLetterQueue;
    if (dlq !== false) {
      await step(
        mode === 'assert'
          ? `The dead-letter queue "${dlq}" exists with other arguments`
          : `The dead-letter queue "${dlq}" does not exist`,
        (c) => (mode === 'assert' ? c.assertQueue(dlq, { durable: true }) : c.checkQueue(dlq)),
      );
      if (mode === 'assert') {
        await step(`Cannot bind "${dlq}" to "${topology.deadLetterExchange}"`, (c) =>
          c.bindQueue(dlq, topology.deadLetterExchange, topology.deadLetterRoutingKey),
        );
      }
    }
  } finally {
    if (!closed) await channel.close().catch(() => {});
  }
}
