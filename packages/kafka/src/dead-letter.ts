import type { DeadLetterReason, RunOutcome } from '@idempotent-consumer/core';
import { DEAD_LETTER_FIELDS, NO_CLAIM_OUTCOME } from '@idempotent-consumer/core/kit';
import type { KafkaHeaders, KafkaMessageLike, ProducedMessageLike } from './types';

/**
 * Headers a dead letter carries besides the original message's own headers: the core's
 * `DEAD_LETTER_FIELDS` (the same names the RabbitMQ and SQS adapters write), and the `x-original-*`
 * position of the message.
 */
export const DEAD_LETTER_HEADERS = {
  ...DEAD_LETTER_FIELDS,
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
  /** The claim outcome of the delivery; `undefined` (written `NONE`) when no claim was made. */
  readonly outcome?: RunOutcome | undefined;
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
    [h.reason]: info.reason,
    [h.outcome]: info.outcome ?? NO_CLAIM_OUTCOME,
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
