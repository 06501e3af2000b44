import type { DeadLetterReason, IdempotencyError } from '@idempotent-consumer/core';
import {
  type LeaseLostFields,
  type MessageSubjectOf,
  TypedEventEmitter,
} from '@idempotent-consumer/core/kit';
import type { Decision } from './decide';

/** Where a message was consumed from: its topic, partition and offset. */
export interface KafkaSource {
  readonly topic: string;
  readonly partition: number;
  /** The message's offset, a decimal string. */
  readonly offset: string;
}

/**
 * The subject of every per-message event, the same fields under the same name (`MessageSubject`) in every
 * adapter: `scope`, `key`, `outcome`, `attempt`, and the broker's `source` ({@link KafkaSource}).
 */
export type MessageSubject = MessageSubjectOf<KafkaSource>;

/**
 * Why a claim was lost, read from the record right after: it no longer exists (`record-vanished`),
 * another claim holds it (`taken-over`), or the read failed (`unknown`).
 */
export type LeaseLostReason = LeaseLostFields['reason'];

/**
 * The events of {@link KafkaEventEmitter}, by name, with their payloads: the same names the RabbitMQ and
 * SQS adapters use for the same happenings. Idempotency outcomes themselves are events of the
 * `Idempotency` runner (`outcome`, `completed`, `released`, `failed`, …).
 */
export interface KafkaIdempotencyEvents {
  /**
   * A message's offset was let resolve, with the {@link Decision} taken (the same shape as in the RabbitMQ
   * and SQS adapters): `decision.action: 'resolve'` (completed, duplicate,
   * settled FAILED record, unprotected run, lease lost after the handler completed) or `'dead-letter'`
   * (sent to the dead-letter topic, or dropped when `deadLetterTopic` is `false`). Exactly one per message
   * whose offset resolves in this process.
   */
  settled: [MessageSubject & { decision: Extract<Decision, { action: 'resolve' | 'dead-letter' }> }];
  /**
   * The message runs again after `delayMs` milliseconds: waited inside the handler call, heartbeating
   * (`paused: false`), or by pausing its partition and leaving its offset unresolved (`paused: true`).
   */
  retryScheduled: [
    MessageSubject & {
      reason: 'handler-error' | 'conflict' | 'lease-lost' | 'store-error' | 'dead-letter-failed';
      delayMs: number;
      paused: boolean;
      error: unknown;
    },
  ];
  /**
   * A message went to the dead-letter topic (`destination`), or was dropped (`destination: null`): one
   * event per copy sent. Once for a FAILED record (marked dead-lettered after its copy: a re-fetch settles
   * it without another); a message dead-lettered without a FAILED record (no key, an invalid key, an
   * UNPROTECTED run) has no mark, so a re-fetch before its offset is committed sends, and reports, another.
   */
  deadLettered: [MessageSubject & { reason: DeadLetterReason; error: string; destination: string | null }];
  /** The key extractor found no key; `action` is what `missingKey` did with the message. */
  missingKey: [MessageSubject & { action: 'dead-letter' | 'process' }];
  /**
   * The key extractor or the fingerprint threw, or the store refused the key: the message is
   * dead-lettered as `invalid-key` (whatever `missingKey` says). `error` says why (an `InvalidKeyError`),
   * the same type as in the RabbitMQ and SQS adapters.
   */
  invalidKey: [MessageSubject & { error: IdempotencyError }];
  /**
   * The store did not answer: consumption of `topic` waits (inline, then with every partition of the topic
   * paused) until a ping answers. `error` is the store's error.
   */
  storeUnavailable: [{ topic: string; partition: number | undefined; error: unknown }];
  /** The store answered again and `topics` were resumed, after `downMs` milliseconds. */
  storeRecovered: [{ topics: string[]; downMs: number }];
  /** A store call the wrapper absorbed failed (a release, a dead-letter mark, a completion write). */
  storeError: [{ operation: string; error: unknown; source: KafkaSource | undefined }];
  /** A broker request failed: a dead-letter `produce`, `pause`, `resume`, `heartbeat`, `commit`. */
  brokerError: [{ operation: string; error: unknown; source: KafkaSource | undefined }];
  /**
   * The message's claim was lost: at the start of a batch's reservation (`during: 'start'`, nothing ran),
   * while the handler ran (`heartbeat`: a lease extension was refused, or none reached the store for a
   * whole lease; whether the handler then returned or threw) or at the outcome write (`write`: the lease
   * held while the handler ran and its `complete`, `release` or `fail` was refused; also the completion
   * write made again after a store outage, unless an extension had been refused while the handler ran:
   * `heartbeat` then), as in the RabbitMQ and SQS adapters (the kit's
   * `leaseLostDuring`). When the handler had completed, the work is done: the offset resolves and the
   * handler is not run again here; otherwise the message is claimed again at once.
   */
  leaseLost: [MessageSubject & LeaseLostFields];
}

/**
 * The typed `EventEmitter` of a wrapper (`idempotentEachMessage(...).events`), the core kit's
 * `TypedEventEmitter`: a listener that throws cannot change what Kafka sees (it is isolated, the other
 * listeners still run), and there is no `error` event.
 */
export class KafkaEventEmitter extends TypedEventEmitter<KafkaIdempotencyEvents> {}

/**
 * Why a message was dead-lettered, sent as the `x-idempotency-dead-letter-reason` header: the core's
 * vocabulary, shared by every adapter.
 */
export type { DeadLetterReason };
