import {
  type BackoffOptions,
  computeBackoffMs,
  type Idempotency,
  type RecordId,
} from '@idempotent-consumer/core';
import type { StoreGate } from '@idempotent-consumer/core/kit';
import { encodeResult } from '@idempotent-consumer/core/kit';
import type { KafkaEventEmitter, KafkaSource } from './events';
import { heartbeatUntil, type WaitContext, waitHeartbeating } from './inline-wait';

/**
 * How {@link writeCompletion} ended: `written` (COMPLETED is recorded: the offset may resolve), `lost`
 * (the store refused the write with LEASE_LOST: another claim holds the key or the record vanished; the
 * caller reports `leaseLost`), or `stopped` (the delivery ended first: the consumer stops, a rebalance,
 * the batch went stale; the offset must stay unresolved).
 */
export type CompletionWrite = 'written' | 'lost' | 'stopped';

/**
 * Writes COMPLETED for a handler that returned when the runner could not (the store stayed unavailable
 * through its `writeAttempts`). Resolving the offset without it would let a rebalance or a crash before
 * the next commit replay a message whose record is still IN_PROGRESS, and run it again once the lease
 * lapses; so the offset never resolves past an unwritten completion. The write is tried again and again,
 * heartbeating: after a `StoreUnavailableError` it closes the store gate and waits for the gate's probe
 * to answer (`StoreGate.waitUntilOpen`: one probe loop for the whole consumer), after any other error it
 * waits one `storeProbeBackoff` step; it ends when the store takes the write (fenced by the claim's token;
 * an expired lease nobody took over still accepts it), refuses it (LEASE_LOST), or the delivery ends
 * (`context.shouldStop()`, the wrapper's `close()` through `signal`, a rejected heartbeat).
 * @throws whatever `context.heartbeat()` rejects with (a rebalance).
 */
export async function writeCompletion(
  idempotency: Idempotency,
  id: RecordId,
  fencingToken: number,
  value: unknown,
  context: WaitContext & { readonly source: KafkaSource },
  gate: StoreGate,
  signal: AbortSignal,
  timing: { readonly storeProbeBackoff: BackoffOptions; readonly brokerHeartbeatIntervalMs: number },
  events: KafkaEventEmitter,
): Promise<CompletionWrite> {
  let encoded: string | undefined;
  try {
    const e = encodeResult(value, idempotency.options);
    encoded = e.kind === 'stored' ? e.value : undefined;
  } catch {
    encoded = undefined;
  }
  const retentionMs = idempotency.options.retentionMs;
  const shouldStop = () => signal.aborted || context.shouldStop();
  const waitContext: WaitContext = { heartbeat: () => context.heartbeat(), shouldStop };
  for (let attempt = 1; ; attempt++) {
    if (shouldStop()) return 'stopped';
    try {
      const reply = await idempotency.store.complete(id, fencingToken, { retentionMs, result: encoded });
      if (reply.ok) return 'written';
      // An earlier try that timed out on our side may have been applied: our own token, COMPLETED.
      return reply.currentFencingToken === fencingToken && reply.state === 'COMPLETED' ? 'written' : 'lost';
    } catch (error) {
      events.emit('storeError', { operation: 'complete', error, source: context.source });
      const wasOpen = !gate.closed;
      if (gate.closeIfUnavailable(error)) {
        if (wasOpen) {
          const { topic, partition } = context.source;
          events.emit('storeUnavailable', { topic, partition, error });
        }
        const stop = new AbortController();
        const onAbort = () => stop.abort();
        signal.addEventListener('abort', onAbort, { once: true });
        try {
          const open = gate.waitUntilOpen(stop.signal);
          const finished = await heartbeatUntil(open, waitContext, timing.brokerHeartbeatIntervalMs);
          if (!finished || !(await open)) return 'stopped';
        } finally {
          stop.abort();
          signal.removeEventListener('abort', onAbort);
        }
        continue;
      }
    }
    const delayMs = computeBackoffMs(attempt, timing.storeProbeBackoff);
    if (!(await waitHeartbeating(delayMs, waitContext, timing.brokerHeartbeatIntervalMs))) return 'stopped';
  }
}
