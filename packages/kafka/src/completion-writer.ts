import type { CompletedResult, ExecutionResult, Idempotency, RecordId } from '@idempotent-consumer/core';
import { recordCompletionLate, type StoreGate } from '@idempotent-consumer/core/kit';
import type { KafkaEventEmitter, KafkaSource } from './events';
import { heartbeatUntil, type WaitContext } from './inline-wait';

/**
 * How {@link writeCompletion} ended:
 * - `written`: the runner's write answered; `result` is what the run ends as with it (`completed` and
 *   recorded; `failed` with `result-too-large` under `onResultTooLarge: 'fail'`; `lease-lost` when the
 *   store refused the write: another claim holds the key or the record vanished);
 * - `stopped`: the delivery ended first (the consumer stops, a rebalance, the batch went stale);
 * - `refused`: the store failed with an error that is not an outage (`error`; a bug, version skew): trying
 *   again would fail the same way.
 *
 * The offset may resolve only after `written`.
 */
export type CompletionWrite<T> =
  | { readonly status: 'written'; readonly result: ExecutionResult<T> }
  | { readonly status: 'stopped' }
  | { readonly status: 'refused'; readonly error: unknown };

/**
 * Writes COMPLETED for a handler that returned when the runner could not (the store stayed unavailable
 * through its `writeAttempts`: the run is `completed` with `recorded: false`). Resolving the offset
 * without it would let a rebalance or a crash before the next commit replay a message whose record is
 * still IN_PROGRESS, and run it again once the lease lapses; so the offset never resolves past an
 * unwritten completion. Each try is the runner's own write (`Idempotency.completeClaim`: the result
 * limits, the fencing, the `completed`/`resultOmitted`/`failed`/`leaseLost` events). After a
 * `StoreUnavailableError` it closes the store gate and waits, heartbeating, for the gate's probe to
 * answer (`StoreGate.waitUntilOpen`: one probe loop for the whole consumer), then tries again; any other
 * error ends it (`refused`). It also ends when the delivery ends (`context.shouldStop()`, the wrapper's
 * `close()` through `signal`, a rejected heartbeat): the offset stays unresolved, but unless `close()`
 * ended it, the write goes on in the background ({@link writeLate}) each time the gate opens, until the
 * store takes it or refuses it, or `close()`. The claim outlives the delivery (its lease runs on), and
 * this process knows the handler completed: given up on, the record stayed IN_PROGRESS, and the
 * message's re-fetch (here or by the partition's new owner after a rebalance) ran the handler again once
 * the lease lapsed, though the store answered again well within the lease.
 * @throws whatever `context.heartbeat()` rejects with (a rebalance).
 */
export async function writeCompletion<T>(
  idempotency: Idempotency,
  id: RecordId,
  run: CompletedResult<T>,
  context: WaitContext & { readonly source: KafkaSource },
  gate: StoreGate,
  signal: AbortSignal,
  timing: { readonly brokerHeartbeatIntervalMs: number },
  events: KafkaEventEmitter,
): Promise<CompletionWrite<T>> {
  const shouldStop = () => signal.aborted || context.shouldStop();
  const waitContext: WaitContext = { heartbeat: () => context.heartbeat(), shouldStop };
  /** The delivery ended before the write landed: the write goes on in the background (not after close()). */
  const stopped = (): CompletionWrite<T> => {
    writeLate(idempotency, id, run, gate, signal, events, context.source);
    return { status: 'stopped' };
  };
  for (;;) {
    if (shouldStop()) return stopped();
    try {
      return { status: 'written', result: await idempotency.completeClaim(id, run) };
    } catch (error) {
      events.emit('storeError', { operation: 'complete', error, source: context.source });
      const wasOpen = !gate.closed;
      if (!gate.closeIfUnavailable(error)) return { status: 'refused', error };
      if (wasOpen) {
        const { topic, partition } = context.source;
        events.emit('storeUnavailable', { topic, partition, error });
      }
      const stop = new AbortController();
      const onAbort = () => stop.abort();
      signal.addEventListener('abort', onAbort, { once: true });
      try {
        const open = gate.waitUntilOpen(stop.signal);
        let finished: boolean;
        try {
          finished = await heartbeatUntil(open, waitContext, timing.brokerHeartbeatIntervalMs);
        } catch (heartbeatError) {
          stopped(); // a rebalance: passed on to the consumer, the write goes on
          throw heartbeatError;
        }
        if (!finished || !(await open)) return stopped();
      } finally {
        stop.abort();
        signal.removeEventListener('abort', onAbort);
      }
    }
  }
}

/**
 * The rest of a {@link writeCompletion} whose delivery ended first, handed to the kit's
 * `recordCompletionLate`: tries the write each time the store gate opens (at once when it is open), until
 * the store takes it (or refuses it: `LEASE_LOST` when the lease lapsed and another claim took the key,
 * answered as a `lease-lost` run by the runner), it fails with an error that is not an outage, the gate is
 * disposed or `signal` aborts (the wrapper's `close()`: not started then). Each failed try is a
 * `storeError` event (`complete`) and, when the store did not answer, closes the gate whatever
 * `storeFailureMode` (as the inline write does: the offset stays unresolved while the completion is
 * unwritten, so this wrapper needs the probe to learn when to try again). Never rejects; not awaited.
 */
function writeLate<T>(
  idempotency: Idempotency,
  id: RecordId,
  run: CompletedResult<T>,
  gate: StoreGate,
  signal: AbortSignal,
  events: KafkaEventEmitter,
  source: KafkaSource,
): void {
  void recordCompletionLate(idempotency, id, run, {
    gate,
    closeGate: 'always',
    signal,
    onStoreError: (error) => events.emit('storeError', { operation: 'complete', error, source }),
  });
}
