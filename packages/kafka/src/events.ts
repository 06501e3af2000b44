import type { DeadLetterReason } from '@idempotent-consumer/core';

/** Why a wrapper paused a partition (or a topic) instead of resolving a message's offset. */
export type PauseReason =
  | 'conflict'
  | 'retry'
  | 'store-unavailable'
  | 'store-error'
  | 'dead-letter-failed'
  | 'lease-lost';

/**
 * What a wrapper reports through `onEvent` (for logs and metrics). Idempotency outcomes themselves are
 * events of the `Idempotency` runner (`outcome`, `completed`, `released`, `failed`, …).
 */
export type KafkaIdempotencyEvent =
  | {
      /** A message went to the dead-letter topic (or was dropped, when `deadLetterTopic` is `false`). */
      readonly type: 'dead-lettered';
      readonly topic: string;
      readonly partition: number;
      readonly offset: string;
      /** `null` when dead-lettering is off and the message was only skipped. */
      readonly deadLetterTopic: string | null;
      readonly reason: DeadLetterReason;
      readonly attempt: number;
      readonly error: string;
    }
  | {
      /** A retry (handler error, conflict) waits `delayMs` inside the handler call, heartbeating. */
      readonly type: 'waiting';
      readonly topic: string;
      readonly partition: number;
      readonly offset: string;
      readonly reason: 'conflict' | 'retry' | 'store-unavailable';
      readonly delayMs: number;
    }
  | {
      /** A partition (or, for `store-unavailable`, every partition of the topic) was paused. */
      readonly type: 'paused';
      readonly topic: string;
      /** `undefined` when the whole topic was paused. */
      readonly partition: number | undefined;
      readonly offset: string;
      readonly reason: PauseReason;
      /** `undefined` while waiting for the store. */
      readonly delayMs: number | undefined;
    }
  | {
      readonly type: 'resumed';
      readonly topic: string;
      readonly partition: number | undefined;
    }
  | {
      /** Something failed that the wrapper absorbed (a resume after disconnect, a release that failed). */
      readonly type: 'error';
      readonly operation: string;
      readonly error: unknown;
    };

/**
 * Why a message was dead-lettered, sent as the `x-idempotency-dead-letter-reason` header: the core's
 * vocabulary, shared by every adapter, re-exported so `@idempotent-consumer/kafka` imports keep working.
 */
export type { DeadLetterReason };
