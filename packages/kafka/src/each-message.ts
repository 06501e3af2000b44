import { InvalidOptionError } from '@idempotent-consumer/core';
import type { KafkaIdempotencyDependencies } from './dependencies';
import { isFatalToConsumer, PartitionPausedError } from './errors';
import type { KafkaHandler } from './handler';
import { BrokerHeartbeatFailure, type Decision, type Delivery } from './message-processor';
import type { KafkaIdempotencyOptions } from './options';
import type { EachMessagePayloadLike } from './types';
import { buildWrapperParts } from './wrapper-parts';

/** An `eachMessage` function, with `close()` to clear its resume timers when the consumer goes away. */
export interface IdempotentEachMessage {
  (payload: EachMessagePayloadLike): Promise<void>;
  /** Clears pending resume timers and the store watcher. Call it after `consumer.disconnect()`. */
  close(): void;
}

/**
 * Wraps a handler into a KafkaJS `eachMessage` that runs it effectively once per idempotency key
 * (DESIGN.md, "Outcome → broker action", Kafka column):
 *
 * - ACQUIRED / ACQUIRED_STALE: runs the handler, completes the record, then returns, so KafkaJS resolves
 *   the offset; DUPLICATE: returns without running.
 * - CONFLICT: claims again every `conflictPollIntervalMs` for up to `conflictWaitMs`, heartbeating; still
 *   held: pauses the partition for the holder's remaining lease and leaves the offset unresolved.
 * - handler error: released, then retried after `computeBackoffMs(attempt, retryBackoff)`: inline up to
 *   `maxInlineDelayMs`, else by pausing the partition; after `maxAttempts` or for a non-retryable error
 *   the record is FAILED and the message goes to the dead-letter topic, then its offset resolves.
 *   PAYLOAD_MISMATCH (and a missing key, by default) go to the dead-letter topic without running.
 * - store unavailable: waits inline up to `maxInlineDelayMs`, then pauses every partition of the topic
 *   until the store answers a ping (fail closed).
 *
 * To leave an offset unresolved, `eachMessage` must throw (KafkaJS resolves it on any normal return): the
 * wrapper pauses first, then throws a {@link PartitionPausedError}, never a `TypeError` or a non-retriable
 * error (KafkaJS would stop the consumer for good). Rebalance errors of `heartbeat()` pass through.
 *
 * @example
 * ```ts
 * const consumer = kafka.consumer({ groupId: 'payments' });
 * await consumer.run({
 *   eachMessage: idempotentEachMessage({ idempotency, consumer, producer }, { groupId: 'payments' },
 *     async ({ message, fencingToken }) => charge(JSON.parse(message.value!.toString()), fencingToken)),
 * });
 * ```
 * @throws {@link InvalidOptionError} when the options are invalid or a dependency is missing.
 */
export function idempotentEachMessage<T>(
  dependencies: KafkaIdempotencyDependencies,
  options: KafkaIdempotencyOptions,
  handler: KafkaHandler<T>,
): IdempotentEachMessage {
  const { resolved, processor, pauser } = buildWrapperParts(
    'idempotentEachMessage',
    dependencies,
    options,
    handler,
  );

  const eachMessage = async (payload: EachMessagePayloadLike): Promise<void> => {
    const { topic, partition, message } = payload;
    const delivery: Delivery = {
      topic,
      partition,
      message,
      heartbeat: () => payload.heartbeat(),
      shouldStop: () => false,
    };
    let decision: Decision;
    try {
      decision = await processor.process(delivery, processor.prepare(topic, partition, message));
    } catch (error) {
      if (error instanceof BrokerHeartbeatFailure) {
        if (!isFatalToConsumer(error.cause)) throw error.cause; // a rebalance: KafkaJS rejoins
        decision = { action: 'pause', reason: 'retry', delayMs: resolved.retryBackoff.baseMs ?? 1000 };
      } else {
        resolved.onEvent({ type: 'error', operation: 'process', error });
        decision = { action: 'pause', reason: 'store-error', delayMs: resolved.retryBackoff.baseMs ?? 1000 };
      }
    }
    const where = `${topic}[${partition}]@${message.offset}`;
    switch (decision.action) {
      case 'resolve':
        return;
      case 'pause':
        pauser.pauseFor(topic, partition, message.offset, decision.delayMs, decision.reason);
        throw new PartitionPausedError(
          `Paused ${topic}[${partition}] for ${decision.delayMs} ms (${decision.reason}); ${where} stays unresolved`,
          topic,
          partition,
          decision.delayMs,
        );
      case 'await-store':
        pauser.pauseUntil(
          topic,
          message.offset,
          () => dependencies.idempotency.store.ping(),
          resolved.storeProbeIntervalMs,
        );
        throw new PartitionPausedError(
          `Paused ${topic} until the idempotency store answers; ${where} stays unresolved`,
          topic,
          partition,
          undefined,
        );
      case 'stop':
        throw new PartitionPausedError(`Stopped before ${where}; it stays unresolved`, topic, partition, 0);
    }
  };
  return Object.assign(eachMessage, { close: () => pauser.close() });
}
