import { DEAD_LETTER_FIELDS } from '@idempotent-consumer/core';

/**
 * Headers the consumer writes on messages it republishes to a delay tier or to the dead-letter exchange.
 * They are for observability: the authoritative attempt count is the idempotency record's. The dead-letter
 * fields (`attempt`, `outcome`, `deadLetterReason`, `error`, `key`, `scope`) are the core's
 * `DEAD_LETTER_FIELDS`, the same names the Kafka and SQS adapters write.
 */
export const HEADERS = {
  /** Which attempt (of the idempotency record, or of the unprotected run) the message had reached (a number). */
  attempt: DEAD_LETTER_FIELDS.attempt,
  /** The claim outcome that led to the republish (`CONFLICT`, `ACQUIRED`, `PAYLOAD_MISMATCH`, …, `NONE`). */
  outcome: DEAD_LETTER_FIELDS.outcome,
  /** Why the message was delayed: `conflict`, `handler-error` or `lease-lost`. */
  retryReason: 'x-idempotency-retry-reason',
  /** The delay tier the message went through, in milliseconds. */
  delayMs: 'x-idempotency-delay-ms',
  /** Why the message was dead-lettered (see `DeadLetterReason`). */
  deadLetterReason: DEAD_LETTER_FIELDS.reason,
  /** `Name [CODE]: message` of the error, at most 1000 characters. */
  error: DEAD_LETTER_FIELDS.error,
  /** The idempotency key, on dead letters of messages that had one. */
  key: DEAD_LETTER_FIELDS.key,
  /** The consumer's idempotency scope, on dead letters. */
  scope: DEAD_LETTER_FIELDS.scope,
  /** The work queue the message was consumed from. */
  originalQueue: 'x-idempotency-original-queue',
  /** @internal Correlates a `basic.return` with its publish (mandatory publishes). */
  publishId: 'x-idempotency-publish-id',
} as const;

/** The header read by the default key extractor when `properties.messageId` is absent. */
export const IDEMPOTENCY_KEY_HEADER = 'idempotency-key';

/** Reads the attempt header (a non-negative integer), or 0 when it is absent or malformed. */
export function attemptFromHeaders(headers: Record<string, unknown> | undefined): number {
  const value = Number(headers?.[HEADERS.attempt]);
  return Number.isSafeInteger(value) && value > 0 ? value : 0;
}
