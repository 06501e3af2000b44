/**
 * Errors of idempotent-consumer. Every error the SDK throws is an {@link IdempotencyError}: a stable
 * SCREAMING_SNAKE `code`, a `retryable` flag, an optional `cause`, and a literal `name`. The brand lets
 * {@link isIdempotencyError} recognise errors thrown by another installed copy of this package, where
 * `instanceof` fails. Modelled on KafkaJS `src/errors.js` (a `retriable` flag and `cause`).
 *
 * @packageDocumentation
 */

const BRAND = Symbol.for('idempotent-consumer.error');

/** Stable machine-readable codes of every {@link IdempotencyError}. */
export type IdempotencyErrorCode =
  | 'INVALID_IDEMPOTENCY_KEY'
  | 'MISSING_IDEMPOTENCY_KEY'
  | 'INVALID_OPTION'
  | 'STORE_UNAVAILABLE'
  | 'UNEXPECTED_STORE_REPLY'
  | 'LEASE_LOST'
  | 'RESULT_TOO_LARGE'
  | 'NON_RETRYABLE'
  | 'TOPOLOGY_MISMATCH'
  | 'PARTITION_PAUSED'
  | 'SQS_OPERATION_FAILED';

/** Options shared by every error constructor. */
export interface IdempotencyErrorOptions {
  /** The underlying error, kept as the standard `Error.cause`. */
  cause?: unknown;
}

/**
 * Base class of every error this SDK throws.
 *
 * @example
 * ```ts
 * try { await idempotency.run(request, handler); }
 * catch (err) { if (isIdempotencyError(err) && err.retryable) scheduleRetry(); }
 * ```
 */
export abstract class IdempotencyError extends Error {
  /** Stable machine-readable code; never changes for a given class. */
  abstract readonly code: IdempotencyErrorCode;
  /** Whether trying the same operation again later can succeed. */
  abstract readonly retryable: boolean;
  /** @internal Brand checked by {@link isIdempotencyError}. */
  readonly [BRAND] = true;

  constructor(message: string, options?: IdempotencyErrorOptions) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
  }
}

/** True when `value` is an {@link IdempotencyError} from any installed copy of this package. */
export function isIdempotencyError(value: unknown): value is IdempotencyError {
  return typeof value === 'object' && value !== null && (value as Record<symbol, unknown>)[BRAND] === true;
}

/** The idempotency key or scope is empty, not a string, too long, or otherwise unusable. Not retryable. */
export class InvalidKeyError extends IdempotencyError {
  override readonly name = 'InvalidKeyError' as const;
  readonly code = 'INVALID_IDEMPOTENCY_KEY' as const;
  readonly retryable = false;
}

/**
 * A message or request carries no idempotency key and the missing-key policy is `reject`. Not retryable:
 * the adapters dead-letter such messages (DESIGN.md, "Key sources").
 */
export class MissingKeyError extends IdempotencyError {
  override readonly name = 'MissingKeyError' as const;
  readonly code = 'MISSING_IDEMPOTENCY_KEY' as const;
  readonly retryable = false;
}

/** An option is out of its range (for example `leaseMs <= 0`). Thrown by constructors. Not retryable. */
export class InvalidOptionError extends IdempotencyError {
  override readonly name = 'InvalidOptionError' as const;
  readonly code = 'INVALID_OPTION' as const;
  readonly retryable = false;
}

/**
 * The idempotency store did not answer (connection refused or closed, command timed out, cluster down).
 * Retryable. The default policy is to fail closed: nothing is acked, committed or deleted while the store
 * is unavailable (DESIGN.md, "store unavailable").
 */
export class StoreUnavailableError extends IdempotencyError {
  override readonly name = 'StoreUnavailableError' as const;
  readonly code = 'STORE_UNAVAILABLE' as const;
  readonly retryable = true;
}

/** The store answered with a reply shape this version does not know. Not retryable: a bug or version skew. */
export class UnexpectedReplyError extends IdempotencyError {
  override readonly name = 'UnexpectedReplyError' as const;
  readonly code = 'UNEXPECTED_STORE_REPLY' as const;
  readonly retryable = false;
}

/**
 * The claim was lost: the record's fencing token is no longer the one this worker holds (the lease expired
 * and another worker claimed the key), or the record vanished. The handler's `signal` aborts with it.
 */
export class LeaseLostError extends IdempotencyError {
  override readonly name = 'LeaseLostError' as const;
  readonly code = 'LEASE_LOST' as const;
  readonly retryable = true;
}

/**
 * A handler's result is larger than `maxResultBytes` after encoding and `onResultTooLarge` is `fail`, or it
 * cannot be serialized as JSON. It is not thrown: the run resolves with `status: 'failed'`,
 * `reason: 'result-too-large'` and this error, after the record was written FAILED, so the operation is
 * never run again for this key (its duplicates get `FAILED`).
 */
export class ResultTooLargeError extends IdempotencyError {
  override readonly name = 'ResultTooLargeError' as const;
  readonly code = 'RESULT_TOO_LARGE' as const;
  readonly retryable = false;
}

/**
 * Throw this from a handler (or wrap another error in it) to mark a failure that must not be retried: the
 * record goes straight to FAILED and the adapters dead-letter the message.
 *
 * @example
 * ```ts
 * if (card.declined) throw new NonRetryableError('card declined', { cause: providerError });
 * ```
 */
export class NonRetryableError extends IdempotencyError {
  override readonly name = 'NonRetryableError' as const;
  readonly code = 'NON_RETRYABLE' as const;
  readonly retryable = false;
}

/** A broker resource (queue, exchange, topic) exists with arguments that differ from what the adapter needs. */
export class TopologyMismatchError extends IdempotencyError {
  override readonly name = 'TopologyMismatchError' as const;
  readonly code = 'TOPOLOGY_MISMATCH' as const;
  readonly retryable = false;
}
