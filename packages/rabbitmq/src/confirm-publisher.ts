import { randomUUID } from 'node:crypto';
import { TopologyMismatchError } from '@idempotent-consumer/core';
import type { Message, Options } from 'amqplib';
import type { PublishChannel } from './amqp-types';
import { PUBLISH_ID_HEADER } from './headers';

/**
 * Publishes on a confirm channel and resolves only once the broker has confirmed the message
 * (`basic.ack` from publisher confirms), so that the original delivery is acked only after its copy is
 * safely in the broker. Publishes are `mandatory`: RabbitMQ sends `basic.return` before the confirm of a
 * message that routes to no queue, and such a publish rejects with {@link @idempotent-consumer/core!TopologyMismatchError} instead
 * of silently dropping the message.
 */
export class ConfirmPublisher {
  readonly #returned = new Set<string>();
  #closedError: Error | undefined;

  constructor(private readonly channel: PublishChannel) {
    channel.on('return', (message: Message) => {
      const id = message.properties?.headers?.[PUBLISH_ID_HEADER];
      if (typeof id === 'string') this.#returned.add(id);
    });
    channel.on('error', (error: Error) => {
      this.#closedError = error;
    });
    channel.on('close', () => {
      this.#closedError ??= new Error('The confirm channel closed');
    });
  }

  /**
   * Publishes one message and waits for its confirm.
   * @throws {@link @idempotent-consumer/core!TopologyMismatchError} when the message routed to no queue.
   * @throws the channel's error when the broker nacked the message or the channel closed.
   */
  publish(exchange: string, routingKey: string, content: Buffer, options: Options.Publish): Promise<void> {
    if (this.#closedError) return Promise.reject(this.#closedError);
    const publishId = randomUUID();
    const headers = {
      ...(options.headers as Record<string, unknown> | undefined),
      [PUBLISH_ID_HEADER]: publishId,
    };
    return new Promise<void>((resolve, reject) => {
      const confirmed = (error: unknown) => {
        const returned = this.#returned.delete(publishId);
        if (error)
          reject(
            error instanceof Error ? error : new Error(`The broker nacked the publish: ${String(error)}`),
          );
        else if (returned) {
          reject(
            new TopologyMismatchError(
              `A message published to exchange "${exchange}" with routing key "${routingKey}" routed to no queue`,
            ),
          );
        } else resolve();
      };
      try {
        this.channel.publish(
          exchange,
          routingKey,
          content,
          { ...options, headers, mandatory: true },
          confirmed,
        );
      } catch (error) {
        this.#returned.delete(publishId);
        reject(error);
      }
    });
  }
}
