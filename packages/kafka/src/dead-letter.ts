import type { DeadLetterReason } from './events';
import type { KafkaHeaders, KafkaMessageLike, ProducedMessageLike } from './types';

/** Headers a dead letter carries besides the original message's own headers. */
export const DEAD_LETTER_HEADERS = {
  /** Why the message was dead-lettered: `FAILED`, `PAYLOAD_MISMATCH`, `MISSING_KEY`, `INVALID_KEY`. */
  outcome: 'x-idempotency-outcome',
  /** The error, as `Name [CODE]: message` (the FAILED record's error). */
  error: 'x-idempotency-error',
  /** The attempt count of the record (decimal). */
  attempt: 'x-idempotency-attempt',
  /** The idempotency key, when the message had one. */
  key: 'x-idempotency-key',
  /** The record's scope. */
  scope: 'x-idempotency-scope',
  originalTopic: 'x-original-topic',
  originalPartition: 'x-original-partition',
  originalOffset: 'x-original-offset',
  originalTimestamp: 'x-original-timestamp',
} as const;

/** What a dead letter says about its message. */
export interface DeadLetterInfo {
  readonly topic: string;
  readonly partition: number;
  readonly message: KafkaMessageLike;
  readonly reason: DeadLetterReason;
  readonly error: string;
  readonly attempt: number;
  readonly scope: string;
  readonly key: string | undefined;
}

/**
 * The dead letter of a message: the same key and value, its headers, and the `x-idempotency-*` and
 * `x-original-*` headers of {@link DEAD_LETTER_HEADERS}.
 */
export function buildDeadLetter(info: DeadLetterInfo): ProducedMessageLike {
  const h = DEAD_LETTER_HEADERS;
  const headers: KafkaHeaders = {
    ...info.message.headers,
    [h.outcome]: info.reason,
    [h.error]: info.error,
    [h.attempt]: String(info.attempt),
    [h.scope]: info.scope,
    [h.originalTopic]: info.topic,
    [h.originalPartition]: String(info.partition),
    [h.originalOffset]: info.message.offset,
  };
  if (info.key !== undefined) headers[h.key] = info.key;
  if (info.message.timestamp !== undefined) headers[h.originalTimestamp] = info.message.timestamp;
  return { key: info.message.key, value: info.message.value, headers };
}
