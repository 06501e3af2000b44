import type { DeadLetterReason, IdempotencyError } from '@idempotent-consumer/core';
import type { LeaseLostFields, MessageSubjectOf } from '@idempotent-consumer/core/kit';
import type { Decision, NakReason } from './decide';

/** Where a JetStream message came from. */
export interface NatsSource {
  readonly stream: string;
  readonly consumer: string;
  /** The subject it was published to. */
  readonly subject: string;
  /** Its sequence number in the stream. */
  readonly streamSequence: number;
  /** How many times JetStream delivered it, this delivery included. */
  readonly deliveryCount: number;
}

/** The subject of every per-message event: the kit's fields with a {@link NatsSource}. */
export type MessageSubject = MessageSubjectOf<NatsSource>;

/**
 * The events of a {@link NatsIdempotentConsumer}, by name, with their payloads: the names and subjects of
 * the other adapters. A listener that throws changes nothing; there is no `error` event.
 */
export interface NatsIdempotencyEvents {
  /**
   * Every message ends in one `settled` once its {@link Decision} was carried out: acked, nak'ed,
   * dead-lettered then terminated, or left (`abandoned` by `stop()`, it comes back after `ack_wait`).
   */
  settled: [MessageSubject & { readonly decision: Decision }];
  /** A `nak` with a delay: the message is delivered again after `delayMs`. */
  retryScheduled: [
    MessageSubject & { readonly reason: NakReason; readonly delayMs: number; readonly error: unknown },
  ];
  /** A copy went to the dead-letter subject (`destination`) and the message was terminated. */
  deadLettered: [
    MessageSubject & {
      readonly reason: DeadLetterReason;
      /** The error as the copy carries it (`x-idempotency-error`). */
      readonly error: string;
      readonly destination: string;
    },
  ];
  /** A message had no key: dead-lettered (`missingKey: 'dead-letter'`) or run unprotected. */
  missingKey: [MessageSubject & { readonly action: 'dead-letter' | 'process' }];
  /** The extractor or fingerprint threw, or the store refused the key: dead-lettered as `invalid-key`. */
  invalidKey: [MessageSubject & { readonly error: IdempotencyError }];
  /** The claim was lost (the kit's `leaseLostDuring`); nothing is acked for a handler that did not complete. */
  leaseLost: [MessageSubject & LeaseLostFields];
  /** The store did not answer: pulling stops until a ping answers. */
  storeUnavailable: [{ readonly stream: string; readonly consumer: string; readonly error: unknown }];
  /** The store answers again and pulling resumes after `downMs`. */
  storeRecovered: [{ readonly stream: string; readonly consumer: string; readonly downMs: number }];
  /** A store call the consumer absorbed failed (a give-back, a dead-letter mark, a late completion). */
  storeError: [
    {
      readonly stream: string;
      readonly consumer: string;
      readonly operation: string;
      readonly error: unknown;
      readonly source: NatsSource | undefined;
    },
  ];
  /** A JetStream call failed (`fetch`, `ack`, `nak`, `working`, `term`, `dead-letter`), or this adapter (`process`). */
  brokerError: [
    {
      readonly stream: string;
      readonly consumer: string;
      readonly operation: string;
      readonly error: unknown;
      readonly source: NatsSource | undefined;
    },
  ];
  /** `start()` checked the topology and pulls. */
  started: [{ readonly stream: string; readonly consumer: string }];
  /** `stop()` ended; `abandoned` messages were still in flight at `stopTimeoutMs`. */
  stopped: [{ readonly stream: string; readonly consumer: string; readonly abandoned: number }];
}
