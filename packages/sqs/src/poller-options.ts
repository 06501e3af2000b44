import { type BackoffOptions, InvalidOptionError } from '@idempotent-consumer/core';
import { MAX_VISIBILITY_TIMEOUT_SECONDS } from './message-attributes';
import type { SqsIdempotencyOptions } from './options';

/** Options of {@link IdempotentSqsPoller}, on top of the shared {@link SqsIdempotencyOptions}. */
export interface SqsPollerOptions extends SqsIdempotencyOptions {
  /** Most messages in flight (received and not yet deleted or given back) at a time. @defaultValue 10 */
  readonly concurrency?: number;
  /**
   * Long-polling wait of each `ReceiveMessage`, in seconds, 0 to 20 (SQS's limit). @defaultValue 20
   */
  readonly waitTimeSeconds?: number;
  /**
   * Visibility timeout requested with each `ReceiveMessage`, in seconds (0 to 43200). Once a claim is
   * acquired, the visibility is extended with the lease, so this only has to cover the claim.
   * @defaultValue the lease rounded up to whole seconds (DESIGN.md: the lease is at least the redelivery timer)
   */
  readonly visibilityTimeoutSeconds?: number;
  /**
   * How long deletes and visibility changes wait for company before a batch request is sent, in
   * milliseconds (a batch is sent at once when 10 entries are waiting). @defaultValue 10
   */
  readonly batchWindowMs?: number;
  /** How often the store is pinged while polling is paused because it is unavailable, in ms. @defaultValue 1000 */
  readonly storeProbeIntervalMs?: number;
  /** Delay between `ReceiveMessage` retries after SQS errors. @defaultValue `{ baseMs: 500, maxMs: 10000 }` */
  readonly receiveErrorBackoff?: BackoffOptions;
}

/** Checks an integer option. @throws {@link InvalidOptionError} */
export function checkInteger(name: string, value: number, min: number, max: number): number {
  if (!Number.isSafeInteger(value) || value < min || value > max) {
    throw new InvalidOptionError(`${name} must be an integer in [${min}, ${max}], got ${value}`);
  }
  return value;
}

/** The poller-only options with defaults applied. @throws {@link InvalidOptionError} */
export function resolvePollerOptions(options: SqsPollerOptions, leaseMs: number) {
  return {
    concurrency: checkInteger('concurrency', options.concurrency ?? 10, 1, 10_000),
    waitTimeSeconds: checkInteger('waitTimeSeconds', options.waitTimeSeconds ?? 20, 0, 20),
    visibilityTimeoutSeconds: checkInteger(
      'visibilityTimeoutSeconds',
      options.visibilityTimeoutSeconds ?? Math.max(1, Math.ceil(leaseMs / 1000)),
      0,
      MAX_VISIBILITY_TIMEOUT_SECONDS,
    ),
    batchWindowMs: checkInteger('batchWindowMs', options.batchWindowMs ?? 10, 0, 60_000),
    storeProbeIntervalMs: checkInteger(
      'storeProbeIntervalMs',
      options.storeProbeIntervalMs ?? 1000,
      1,
      3_600_000,
    ),
    receiveErrorBackoff: { baseMs: 500, maxMs: 10_000, ...options.receiveErrorBackoff },
  };
}
