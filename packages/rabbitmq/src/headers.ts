import { DEAD_LETTER_FIELDS } from '@idempotent-consumer/core/kit';

/**
 * The header the default key extractor reads when the AMQP `message-id` property is absent (the same
 * name the Kafka adapter reads).
 */
export const IDEMPOTENCY_KEY_HEADER = 'idempotency-key';

/**
 * Headers the consumer writes on a dead letter (a copy published to the dead-letter exchange): the core's
 * `DEAD_LETTER_FIELDS` (`reason`, `outcome`, `error`, `attempt`, `key`, `scope`; the same names the Kafka
 * and SQS adapters write) plus the work queue the message came from. `attempt` is a number header.
 */
export const DEAD_LETTER_HEADERS = {
  ...DEAD_LETTER_FIELDS,
  /** The work queue the message was consumed from. */
  originalQueue: 'x-idempotency-original-queue',
} as const;

/**
 * Headers the consumer writes on a copy republished to a delay tier. They are for observability: the
 * authoritative attempt count is the idempotency record's (for a run without a key, `attempt` is the
 * count itself).
 */
export const RETRY_HEADERS = {
  /** Which attempt (of the idempotency record, or of the unprotected run) the message had reached (a number). */
  attempt: DEAD_LETTER_FIELDS.attempt,
  /** The claim outcome that led to the republish (`CONFLICT`, `ACQUIRED`, `UNPROTECTED`, …). */
  outcome: DEAD_LETTER_FIELDS.outcome,
  /** Why the message was delayed: `conflict`, `handler-error` or `lease-lost`. */
  reason: 'x-idempotency-retry-reason',
  /** The delay tier the message went through, in milliseconds (a number). */
  delayMs: 'x-idempotency-delay-ms',
  /** `Name [CODE]: message` of the handler's error, at most 1000 characters (absent for a CONFLICT). */
  error: DEAD_LETTER_FIELDS.error,
} as const;

/**
 * Header set on every republished copy (delay tier and dead letter): a random UUID per publish that
 * matches a returned (unroutable) `mandatory` publish to its confirm. Replaced on every republish; not
 * meant for readers.
 */
export const PUBLISH_ID_HEADER = 'x-idempotency-publish-id';

/** Reads the attempt header (a positive integer), or 0 when it is absent or malformed. */
export function attemptFromHeaders(headers: Record<string, unknown> | undefined): number {
  const value = Number(headers?.[RETRY_HEADERS.attempt]);
  return Number.isSafeInteger(value) && value > 0 ? value : 0;
}
