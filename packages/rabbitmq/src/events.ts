import type { DeadLetterReason, RunOutcome } from '@idempotent-consumer/core';
import type { AckReason, RetryReason } from './decide';

/** Identifies the delivery an event is about. */
export interface DeliverySubject {
  /** The work queue. */
  readonly queue: string;
  readonly scope: string;
  /** The idempotency key, `undefined` when the delivery carried none (or the extractor threw). */
  readonly key: string | undefined;
  /** The delivery tag on the consume channel. */
  readonly deliveryTag: number;
  /** Whether RabbitMQ flagged the delivery as redelivered (it was delivered before and not acked). */
  readonly redelivered: boolean;
}

/** Why a delivery was requeued (`nack` with requeue) instead of acked. */
export type RequeueReason = 'store-unavailable' | 'paused' | 'stopping' | 'publish-failed' | 'internal-error';

/** State of an {@link IdempotentConsumer}. */
export type ConsumerState = 'idle' | 'starting' | 'running' | 'paused' | 'stopping' | 'stopped' | 'closed';

/**
 * Events of an idempotent RabbitMQ consumer, by name, with their payloads. A listener that throws is
 * isolated: it never changes what the broker sees. There is no `error` event (nothing can crash the process
 * through an unhandled `error` event); failures come as the specific events below.
 */
export interface IdempotentConsumerEvents {
  /** A delivery arrived (before its key is read); every delivery ends in exactly one settling event. */
  delivery: [{ queue: string; deliveryTag: number; redelivered: boolean }];
  /** A delivery was acked: its handler completed, it was a duplicate, or it ran unprotected. */
  acked: [DeliverySubject & { reason: AckReason; outcome: RunOutcome | undefined }];
  /**
   * A delivery was republished to a delay tier (confirmed), then acked: a CONFLICT, or a retryable handler
   * error. `delayMs` is the tier, `wantedDelayMs` the remaining lease or backoff before rounding.
   */
  retried: [
    DeliverySubject & {
      reason: RetryReason;
      outcome: RunOutcome;
      attempt: number;
      delayMs: number;
      wantedDelayMs: number;
      delayQueue: string;
      error: string | undefined;
    },
  ];
  /** A delivery was published to the dead-letter exchange (confirmed), then acked. */
  deadLettered: [
    DeliverySubject & {
      reason: DeadLetterReason;
      outcome: RunOutcome | undefined;
      attempt: number;
      error: string;
      exchange: string;
      routingKey: string;
    },
  ];
  /** A delivery was given back to the queue (`nack` with requeue); the broker delivers it again. */
  requeued: [DeliverySubject & { reason: RequeueReason; error: unknown }];
  /** A delivery had no idempotency key: `rejected` (dead-lettered) or `processed` without idempotency. */
  missingKey: [DeliverySubject & { action: 'rejected' | 'processed' }];
  /** The store did not answer a claim: consumption stopped (`basic.cancel`) until it answers again. */
  paused: [{ queue: string; error: unknown }];
  /** The store answered a probe again and consumption resumed; `pausedMs` is how long it was paused. */
  resumed: [{ queue: string; pausedMs: number }];
  /** A probe of the store failed while paused; the next comes after a backoff. */
  storeProbeFailed: [{ queue: string; probe: number; error: unknown }];
  /** A republish to a delay tier or the dead-letter exchange failed; the delivery is requeued after the delay. */
  publishFailed: [DeliverySubject & { error: unknown; exchange: string; routingKey: string }];
  /** `ack`/`nack` threw (the consume channel is closed); the broker redelivers the message. */
  settleFailed: [DeliverySubject & { error: unknown }];
  /** A channel the consumer opened closed without `stop()`; `consume` closes the consumer for good. */
  channelClosed: [{ queue: string; channel: 'consume' | 'publish'; error: unknown }];
  /** RabbitMQ cancelled the consumer (the queue was deleted, or a node failed); the consumer is closed. */
  cancelled: [{ queue: string }];
}
