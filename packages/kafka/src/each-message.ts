import type { MessageSpan } from '@idempotent-consumer/core/kit';
import type { KafkaIdempotencyDependencies } from './dependencies';
import { isFatalToConsumer, partitionPausedError } from './errors';
import type { KafkaEventEmitter } from './events';
import type { KafkaHandler } from './handler';
import {
  BrokerHeartbeatFailure,
  type Delivery,
  offsetPaused,
  offsetResolved,
  type ProcessEnd,
  sourceOf,
} from './kafka-port';
import type { KafkaIdempotencyOptions } from './options';
import type { EachMessagePayloadLike } from './types';
import { buildWrapperParts } from './wrapper-parts';

/**
 * An `eachMessage` function, with its `events` and `close()` to clear its resume timers when the consumer
 * goes away.
 */
export interface IdempotentEachMessage {
  (payload: EachMessagePayloadLike): Promise<void>;
  /** The wrapper's events (`settled`, `retryScheduled`, `deadLettered`, …); see {@link KafkaIdempotencyEvents}. */
  readonly events: KafkaEventEmitter;
  /**
   * Ends every inline wait (a conflict, a retry, the store, a completion write while the store is down, a
   * dead-letter produce the broker has not answered: their offsets stay unresolved) and the background
   * completion writes of deliveries that ended before their write landed (a rebalance, a stale batch: each
   * is tried again whenever the store answers until then), clears pending resume
   * timers and the store watcher, gives the consumer back its own `pause` and `resume` (the wrapper
   * records the application's calls through them, to never resume a partition the application paused),
   * stops listening to the Redis client. Call it before
   * `consumer.disconnect()`: KafkaJS's disconnect waits for the `eachMessage` in flight, and a completion
   * write waiting for Redis ends only on `close()` (or when Redis answers). A message KafkaJS still hands
   * over after `close()` is claimed and run as usual; one that would wait (a conflict, a retry delay, the
   * store, a dead-letter produce) ends at once, its offset unresolved.
   */
  close(): void;
  /**
   * Sends one ping to the idempotency store (bounded by its command timeout). Await it before
   * `consumer.run()` to refuse to start against a store that does not answer; the wrapper also pings once
   * on its first message and logs a failure as an error (the message then waits fail-closed).
   * @throws {@link @idempotent-consumer/core!StoreUnavailableError} naming the wrapper and where Redis is (host and port).
   */
  checkStore(): Promise<void>;
}

/**
 * Wraps a handler into a KafkaJS `eachMessage` that runs it effectively once per idempotency key
 * (docs/design.md#outcome-to-broker-action, Kafka column):
 *
 * - ACQUIRED / ACQUIRED_STALE: runs the handler, completes the record, then returns, so KafkaJS resolves
 *   the offset; DUPLICATE: returns without running.
 * - CONFLICT: waits up to `conflictWaitMs` for the holder's outcome, heartbeating (DUPLICATE within
 *   milliseconds of the holder's complete); still held: pauses the partition for
 *   `min(remaining lease, maxConflictDelayMs)` and leaves the offset unresolved.
 * - handler error: released, then retried after `computeBackoffMs(attempt, retryBackoff)`: inline up to
 *   `maxInlineDelayMs`, else by pausing the partition; after `maxAttempts` or for a non-retryable error
 *   the record is FAILED and the message goes to the dead-letter topic, then its offset resolves.
 *   PAYLOAD_MISMATCH (and a missing key, by default) go to the dead-letter topic without running.
 * - store unavailable: waits inline up to `maxInlineDelayMs` in all (pings included), then pauses every
 *   partition of the topic until the store answers a ping (fail closed); with the runner's
 *   `storeFailureMode: 'open'`, runs it through `Idempotency.run` instead, which emits `failOpen` and runs
 *   the handler unprotected while the store still does not answer.
 * - no key: dead-letters (`missingKey: 'dead-letter'`) or runs the handler unprotected
 *   (`missingKey: 'process'`, `outcome: 'UNPROTECTED'`, retried up to `maxAttempts` runs).
 *
 * To leave an offset unresolved, `eachMessage` must throw (KafkaJS resolves it on any normal return): the
 * wrapper pauses first, then throws a {@link PartitionPausedError}, never a `TypeError` or a non-retriable
 * error (KafkaJS would stop the consumer for good). Rebalance errors of `heartbeat()` pass through. When a
 * pause of the wrapper ends, it resumes only what it paused: a partition the application paused itself
 * (`consumer.pause`, before or meanwhile) stays paused (`PartitionPauser`).
 *
 * @example
 * ```ts
 * const consumer = kafka.consumer({ groupId: 'payments' });
 * await consumer.run({
 *   eachMessage: idempotentEachMessage({ idempotency, consumer, producer }, { groupId: 'payments' },
 *     async ({ message, fencingToken }) => charge(JSON.parse(message.value!.toString()), fencingToken)),
 * });
 * ```
 * Listen with `eachMessage.events.on('deadLettered', (e) => ...)` on the returned function.
 * @throws {@link @idempotent-consumer/core!InvalidOptionError} when the options are invalid or a dependency is missing.
 */
export function idempotentEachMessage<T>(
  dependencies: KafkaIdempotencyDependencies,
  options: KafkaIdempotencyOptions,
  handler: KafkaHandler<T>,
): IdempotentEachMessage {
  const { events, port, pauser, gate, close, resolved, stopping, checkStore, checkStoreOnFirstUse } =
    buildWrapperParts('idempotentEachMessage', dependencies, options, handler);

  const eachMessage = async (payload: EachMessagePayloadLike): Promise<void> => {
    const { topic, partition, message } = payload;
    const delivery: Delivery = {
      topic,
      partition,
      message,
      heartbeat: () => payload.heartbeat(),
      shouldStop: () => stopping.aborted,
    };
    void checkStoreOnFirstUse();
    const fallbackDelayMs = resolved.retryBackoff.baseMs ?? 1000;
    let end: ProcessEnd;
    try {
      end = await port.process(delivery, port.prepare(delivery));
    } catch (error) {
      // process() ends a store error (and a `scope` function that threw) as a pause itself, with the
      // message's span; what else is thrown here is a broker heartbeat failure, or a bug.
      let span: MessageSpan | undefined;
      if (error instanceof BrokerHeartbeatFailure) {
        span = error.span;
        if (!isFatalToConsumer(error.cause)) {
          span?.end(error.cause);
          throw error.cause; // a rebalance: KafkaJS rejoins
        }
        events.emit('brokerError', {
          operation: 'heartbeat',
          error: error.cause,
          source: sourceOf(delivery),
        });
      } else {
        events.emit('storeError', { operation: 'process', error, source: sourceOf(delivery) });
      }
      const failure = error instanceof BrokerHeartbeatFailure ? error.cause : error;
      end = {
        action: 'pause',
        reason: 'store-error',
        delayMs: fallbackDelayMs,
        error: failure,
        span,
        failure,
      };
    }
    const where = `${topic}[${partition}]@${message.offset}`;
    switch (end.action) {
      case 'resolve':
        // KafkaJS resolves the offset on this return.
        offsetResolved(end);
        events.emit('settled', end.settled);
        return;
      case 'pause':
        if (end.delayMs === undefined) {
          pauser.pauseUntilStoreAnswers(topic, () => !gate.closed);
          offsetPaused(end);
          throw partitionPausedError(
            `Paused ${topic} until the idempotency store answers; ${where} stays unresolved`,
            topic,
            partition,
            undefined,
          );
        }
        pauser.pauseFor(topic, partition, end.delayMs);
        offsetPaused(end);
        throw partitionPausedError(
          `Paused ${topic}[${partition}] for ${end.delayMs} ms (${end.reason}); ${where} stays unresolved`,
          topic,
          partition,
          end.delayMs,
        );
      case 'stop':
        throw partitionPausedError(`Stopped before ${where}; it stays unresolved`, topic, partition, 0);
    }
  };
  return Object.assign(eachMessage, { events, close, checkStore });
}
