import type { BackoffOptions } from '@idempotent-consumer/core';
import {
  computeBackoffMs,
  encodeResult,
  type Idempotency,
  isIdempotencyError,
  type RecordId,
} from '@idempotent-consumer/core';
import type { KafkaEventEmitter, KafkaSource } from './events';
import { type WaitContext, waitHeartbeating } from './inline-wait';

/**
 * Writes COMPLETED for a handler that returned when the runner could not (the store stayed unavailable
 * through its `writeAttempts`). Resolving the offset without it would let a rebalance or a crash before
 * the next commit replay a message whose record is still IN_PROGRESS, and run it again once the lease
 * lapses. So the write is retried, pings apart (`storeProbeBackoff`), heartbeating, until the store takes
 * it (fenced by the claim's token; an expired lease nobody took over still accepts it) or refuses it
 * (LEASE_LOST: another worker's outcome rules).
 * @returns false when the delivery had to end first (the consumer stops, the batch went stale).
 */
export async function writeCompletion(
  idempotency: Idempotency,
  id: RecordId,
  fencingToken: number,
  value: unknown,
  context: WaitContext & { readonly source: KafkaSource },
  timing: { readonly storeProbeBackoff: BackoffOptions; readonly brokerHeartbeatIntervalMs: number },
  events: KafkaEventEmitter,
): Promise<boolean> {
  let encoded: string | undefined;
  try {
    const e = encodeResult(value, idempotency.options);
    encoded = e.kind === 'stored' ? e.value : undefined;
  } catch {
    encoded = undefined;
  }
  const retentionMs = idempotency.options.retentionMs;
  for (let attempt = 1; ; attempt++) {
    try {
      await idempotency.store.complete(id, fencingToken, { retentionMs, result: encoded });
      return true;
    } catch (error) {
      const unavailable = isIdempotencyError(error) && error.code === 'STORE_UNAVAILABLE';
      events.emit('storeError', { operation: 'complete', error, source: context.source });
      if (!unavailable) return true;
    }
    const delayMs = computeBackoffMs(attempt, timing.storeProbeBackoff);
    if (!(await waitHeartbeating(delayMs, context, timing.brokerHeartbeatIntervalMs))) return false;
  }
}
