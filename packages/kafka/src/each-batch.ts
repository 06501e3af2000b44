import { LeaseKeeperSet } from '@idempotent-consumer/core/kit';
import type { KafkaIdempotencyDependencies } from './dependencies';
import { isFatalToConsumer } from './errors';
import type { KafkaEventEmitter } from './events';
import type { KafkaHandler } from './handler';
import {
  BrokerHeartbeatFailure,
  type Delivery,
  idOf,
  offsetPaused,
  offsetResolved,
  offsetUnresolved,
  type ProcessEnd,
} from './kafka-port';
import type { KafkaIdempotencyOptions } from './options';
import type { EachBatchPayloadLike, KafkaMessageLike } from './types';
import { buildWrapperParts } from './wrapper-parts';

/**
 * An `eachBatch` function, with its `events` and `close()` to clear its resume timers when the consumer
 * goes away.
 */
export interface IdempotentEachBatch {
  (payload: EachBatchPayloadLike): Promise<void>;
  /** The wrapper's events (`settled`, `retryScheduled`, `deadLettered`, …); see {@link KafkaIdempotencyEvents}. */
  readonly events: KafkaEventEmitter;
  /** See {@link IdempotentEachMessage.close}. */
  close(): void;
  /** See {@link IdempotentEachMessage.checkStore}. */
  checkStore(): Promise<void>;
}

/**
 * Wraps a handler into a KafkaJS `eachBatch` that runs it effectively once per idempotency key, with the
 * outcome mapping of {@link idempotentEachMessage}, and:
 *
 * - claims every message of the batch in one round trip (`idempotency.claimMany`: pipelined; on a Redis
 *   Cluster batched per node by auto-pipelining), keeping the claims of waiting messages alive;
 * - runs the handlers one after another in partition order, calling `resolveOffset` as each completes (or
 *   is a duplicate or a dead letter), then `heartbeat()` and `commitOffsetsIfNecessary()`; once a
 *   handler returned, the next message starts while its completion is written (one completion in
 *   flight at most), and an offset resolves only after its completion was written and every earlier
 *   offset resolved;
 * - stops early, leaving the rest unresolved and releasing their claims, when `isStale()` or
 *   `!isRunning()`, or when a message must wait longer than `maxInlineDelayMs` (the partition is paused
 *   for that time) or the store does not answer (the topic is paused until it does). After such a stop
 *   the next batch of the partition claims its first message alone, so a message that keeps failing does
 *   not use up the attempts of those behind it.
 *
 * Run it with `eachBatchAutoResolve: false`: with KafkaJS's default (`true`), KafkaJS resolves the whole
 * batch when `eachBatch` returns, including the messages an early stop left unresolved.
 *
 * @example
 * ```ts
 * await consumer.run({
 *   eachBatchAutoResolve: false,
 *   eachBatch: idempotentEachBatch({ idempotency, consumer, producer }, { groupId: 'payments' },
 *     async ({ message, fencingToken }) => charge(JSON.parse(message.value!.toString()), fencingToken)),
 * });
 * ```
 * @throws {@link @idempotent-consumer/core!InvalidOptionError} when the options are invalid or a dependency is missing.
 */
export function idempotentEachBatch<T>(
  dependencies: KafkaIdempotencyDependencies,
  options: KafkaIdempotencyOptions,
  handler: KafkaHandler<T>,
): IdempotentEachBatch {
  const { events, port, pauser, gate, close, stopping, checkStore, checkStoreOnFirstUse } = buildWrapperParts(
    'idempotentEachBatch',
    dependencies,
    options,
    handler,
  );
  const { idempotency } = dependencies;
  /** Per partition, the offset an early stop left unresolved: the next batch claims it alone first. */
  const stoppedAt = new Map<string, string>();

  const eachBatch = async (payload: EachBatchPayloadLike): Promise<void> => {
    const { topic, partition, messages } = payload.batch;
    const tp = `${partition}:${topic}`;
    const shouldStop = () => stopping.aborted || !payload.isRunning() || payload.isStale();
    void checkStoreOnFirstUse();
    const deliveryOf = (message: KafkaMessageLike): Delivery => ({
      topic,
      partition,
      message,
      heartbeat: () => payload.heartbeat(),
      shouldStop,
    });
    /** Applies an end that leaves `message` unresolved: a pause is recorded once carried out. */
    const stop = (message: KafkaMessageLike, end: Exclude<ProcessEnd, { action: 'resolve' }>) => {
      if (end.action === 'stop') return;
      stoppedAt.set(tp, message.offset);
      if (end.delayMs !== undefined) pauser.pauseFor(topic, partition, end.delayMs);
      else pauser.pauseUntilStoreAnswers(topic, () => !gate.closed);
      offsetPaused(end);
    };

    let index = 0;
    while (index < messages.length) {
      if (shouldStop()) return;
      const first = messages[index]!;
      const end = stoppedAt.get(tp) === first.offset ? index + 1 : messages.length;
      const window = messages.slice(index, end).map((message) => {
        const delivery = deliveryOf(message);
        return { message, delivery, prepared: port.prepare(delivery) };
      });

      // One round trip claims the whole window.
      const claimed = await port.claimBatch(window.map((w) => w.prepared));
      if (claimed !== undefined && !Array.isArray(claimed)) {
        // Fail closed; under the runner's storeFailureMode 'open' claimBatch resolves undefined and each
        // message claims on its own below, running unprotected if the store still does not answer.
        const { storeUnavailable: error } = claimed;
        gate.close(error, window[0]!.delivery);
        const answered = await guard(() => port.waitForStore(window[0]!.delivery));
        if (answered === 'up') continue;
        if (answered === 'down') {
          // No message ran: the span of the one the batch stops at records the pause.
          const prepared = window[0]!.prepared;
          const span = port.span(
            window[0]!.delivery,
            prepared.kind === 'keyed' ? prepared.request.scope : undefined,
          );
          stop(first, { action: 'pause', reason: 'store-unavailable', delayMs: undefined, error, span });
        }
        return;
      }
      const replies = claimed ?? [];

      // The claims of the messages waiting their turn: their leases are extended together until each runs.
      // Those a stop leaves unrun are given back (no attempt spent), again once the store answers.
      const leaseMs = port.leaseMs;
      const pending = new LeaseKeeperSet<number>(
        idempotency,
        { leaseMs },
        {
          onStoreError: ({ operation, error }) =>
            events.emit('storeError', { operation, error, source: undefined }),
        },
        { gate, signal: stopping },
      );
      replies.forEach((reply, i) => {
        const prepared = window[i]!.prepared;
        if (
          (reply?.outcome === 'ACQUIRED' || reply?.outcome === 'ACQUIRED_STALE') &&
          prepared.kind === 'keyed'
        ) {
          pending.add(i, idOf(prepared.request), reply);
        }
      });
      pending.start();
      /**
       * The message whose handler returned and whose outcome is still being written (complete): the next
       * message's handler may run meanwhile, in partition order, so the completion's round trip overlaps
       * the next start's. Its offset resolves only once its processing ended `resolve`, and offsets resolve
       * in order: nothing unwritten is committed.
       */
      let tail: { readonly message: KafkaMessageLike; readonly ending: Promise<ProcessEnd> } | undefined;
      /** Waits for the tail's end and resolves its offset; false when it stopped the batch. */
      const settleTail = async (): Promise<boolean> => {
        if (tail === undefined) return true;
        const { message, ending } = tail;
        tail = undefined;
        const end = await ending;
        if (end.action !== 'resolve') {
          stop(message, end);
          return false;
        }
        payload.resolveOffset(message.offset);
        // Only now: a message that ended while an earlier one's completion was written is not settled,
        // nor its broker action counted, when that write stops the batch (its re-fetch settles it).
        offsetResolved(end);
        events.emit('settled', end.settled);
        if (stoppedAt.get(tp) === message.offset) stoppedAt.delete(tp);
        await guard(async () => {
          await payload.heartbeat();
          await payload.commitOffsetsIfNecessary();
        });
        return true;
      };
      let current: Promise<ProcessEnd> | undefined;
      try {
        for (const [i, { message, delivery, prepared }] of window.entries()) {
          if (shouldStop()) {
            await settleTail();
            return;
          }
          // A claim the set held comes with its last extension: execute counts the lease from there.
          const held = pending.has(i);
          const taken = held ? await pending.take(i) : undefined;
          const reply = held ? taken?.claim : replies[i];
          let returned!: () => void;
          const handlerReturned = new Promise<'returned'>((resolve) => {
            returned = () => resolve('returned');
          });
          // A store error ends as a pause (process()); a broker heartbeat failure passes through guard.
          const claim = { reply, onHandlerReturned: returned, renewedLease: taken?.renewedLease };
          const ending = guard(() => port.process(delivery, prepared, claim));
          current = ending;
          // On until this message's handler returned (its completion may still be in flight) or its
          // processing ended (a duplicate, a failure, a pause: those are never overlapped).
          const first = await Promise.race([
            handlerReturned,
            ending.then(
              () => 'ended' as const,
              () => 'ended' as const,
            ),
          ]);
          // The previous message's end, now that this one's handler ran after it.
          if (!(await settleTail())) return;
          tail = { message, ending };
          current = undefined;
          if (first === 'ended' && !(await settleTail())) return;
        }
        await settleTail();
      } finally {
        // Never leave a handler or a completion running behind an early return or a broker error; the
        // messages among them that ended `resolve` stay unresolved.
        for (const left of await Promise.allSettled([current, tail?.ending])) {
          if (left.status === 'fulfilled') offsetUnresolved(left.value);
        }
        await pending.releaseAll();
      }
      index = end;
    }
  };

  /**
   * Runs `fn`; a broker error (a rebalance seen by `heartbeat()` or a commit) passes through unless KafkaJS
   * would stop the consumer on it; any other error is rethrown safely. The message span a heartbeat
   * failure carries ends with it.
   */
  async function guard<R>(fn: () => Promise<R>): Promise<R> {
    try {
      return await fn();
    } catch (error) {
      const cause = error instanceof BrokerHeartbeatFailure ? error.cause : error;
      if (error instanceof BrokerHeartbeatFailure) error.span?.end(cause);
      if (!isFatalToConsumer(cause)) throw cause;
      events.emit('brokerError', { operation: 'broker', error: cause, source: undefined });
      throw new Error(`eachBatch stopped on a broker error: ${String((cause as Error)?.message ?? cause)}`, {
        cause,
      });
    }
  }

  return Object.assign(eachBatch, { events, close, checkStore });
}
