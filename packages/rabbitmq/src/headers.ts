/**
 * Headers the consumer writes on messages it republishes to a delay tier or to the dead-letter exchange.
 * They are for observability: the authoritative attempt count is the idempotency record's.
 */
export const HEADERS = {
  /** Which attempt (of the idempotency record, or of the unprotected run) the message had reached. */
  attempt: 'x-idempotency-attempt',
  /** The claim outcome that led to the republish (`CONFLICT`, `ACQUIRED`, `PAYLOAD_MISMATCH`, …). */
  outcome: 'x-idempotency-outcome',
  /** Why the message was delayed: `conflict`, `handler-error` or `lease-lost`. */
  retryReason: 'x-idempotency-retry-reason',
  /** The delay tier the message went through, in milliseconds. */
  delayMs: 'x-idempotency-delay-ms',
  /** Why the message was dead-lettered (see `DeadLetterReason`). */
  deadLetterReason: 'x-idempotency-dead-letter-reason',
  /** `Name [CODE]: message` of the error, at most 1000 characters. */
  error: 'x-idempotency-error',
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
