import type { BackoffOptions } from '@idempotent-consumer/core';
import { check } from '@idempotent-consumer/core/kit';
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
   * @defaultValue the lease rounded up to whole seconds (docs/design.md#outcome-to-broker-action: the lease is at least the redelivery timer)
   */
  readonly visibilityTimeoutSeconds?: number;
  /**
   * How long deletes and visibility changes wait for company before a batch request is sent, in
   * milliseconds (a batch is sent at once when 10 entries are waiting). @defaultValue 10
   */
  readonly batchWindowMs?: number;
  /**
   * How long `stop()` waits for in-flight messages (handlers and their deletes), in milliseconds. Messages
   * still running then are abandoned: nothing more is sent to SQS for them (no delete, no visibility
   * extension, no dead-letter copy), so they come back when their visibility timeout lapses, where their
   * record decides (a handler that completed meanwhile makes them a DUPLICATE, one that failed for good
   * has them dead-lettered then). The pending deletes and visibility changes
   * are then sent and waited for what is left of it, at least 1 s; one SQS has not answered by then is not
   * waited for (its message is abandoned too and becomes visible again, unless the request still lands).
   * Such requests, and the dead-letter copy of a message abandoned while it was sent, are aborted, so
   * nothing of the poller keeps the process alive; `stop()` then resolves with the count abandoned.
   * @defaultValue 30000
   */
  readonly stopTimeoutMs?: number;
  /** Delay between `ReceiveMessage` retries after SQS errors. @defaultValue `{ baseMs: 500, maxMs: 10000 }` */
  readonly receiveErrorBackoff?: BackoffOptions;
}

/** The poller-only options with defaults applied (internal). @throws {@link @idempotent-consumer/core!InvalidOptionError} */
export function resolvePollerOptions(options: SqsPollerOptions, leaseMs: number) {
  return {
    concurrency: check.atMost(
      'concurrency',
      check.positiveInteger('concurrency', options.concurrency, 10),
      10_000,
    ),
    waitTimeSeconds: check.atMost(
      'waitTimeSeconds',
      check.nonNegativeInteger('waitTimeSeconds', options.waitTimeSeconds, 20),
      20,
    ),
    visibilityTimeoutSeconds: check.atMost(
      'visibilityTimeoutSeconds',
      check.nonNegativeInteger(
        'visibilityTimeoutSeconds',
        options.visibilityTimeoutSeconds,
        Math.max(1, Math.ceil(leaseMs / 1000)),
      ),
      MAX_VISIBILITY_TIMEOUT_SECONDS,
    ),
    batchWindowMs: check.atMost(
      'batchWindowMs',
      check.nonNegativeInteger('batchWindowMs', options.batchWindowMs, 10),
      60_000,
    ),
    stopTimeoutMs: check.stopTimeoutMs(options.stopTimeoutMs),
    receiveErrorBackoff: check.backoff('receiveErrorBackoff', options.receiveErrorBackoff, {
      baseMs: 500,
      maxMs: 10_000,
    }),
  };
}
