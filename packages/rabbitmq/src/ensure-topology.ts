import { TopologyMismatchError } from '@idempotent-consumer/core';
import type { AmqpConnection, ConsumeChannel } from './amqp-types';
import { closeOrClosed } from './close';
import { type ConsumerTopology, delayTierArguments } from './topology';

/**
 * Declares (`assert`) or checks (`check`, passive declare) the topology, on a scratch channel of its own:
 * AMQP 0-9-1 closes a channel on a failed declaration (404 NOT_FOUND, 406 PRECONDITION_FAILED), and the
 * consumer's channels must survive a failed check.
 *
 * @throws {@link @idempotent-consumer/core!TopologyMismatchError} when the work queue is missing, a resource is missing (`check`),
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
    // With or without the broker's close-ok: a socket that ends meanwhile must not hold start() or a
    // reconnect for ever (the next step then fails on the closed connection).
    if (!closed) await closeOrClosed(channel);
  }
}
