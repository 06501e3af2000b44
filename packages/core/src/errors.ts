/**
 * Errors of idempotent-consumer. Every error the SDK throws is an {@link IdempotencyError}: a stable
 * SCREAMING_SNAKE `code`, a `retryable` flag, an optional `cause`, and a literal `name`. The brand lets
 * {@link isIdempotencyError} recognise errors thrown by another installed copy of this package, where
 * `instanceof` fails. Modelled on KafkaJS `src/errors.js` (a `retriable` flag and `cause`).
 *
 * @packageDocumentation
 */

const BRAND = Symbol.for('idempotent-consumer.error');

/**
 * Stable machine-readable codes of the core's {@link IdempotencyError}s. An adapter's own errors carry
 * codes of their own (the Kafka adapter's `KafkaErrorCode`, the SQS adapter's `SqsErrorCode`), declared in
 * that adapter.
 */
export type IdempotencyErrorCode =
  | 'INVALID_IDEMPOTENCY_KEY'
  | 'MISSING_IDEMPOTENCY_KEY'
  | 'INVALID_OPTION'
  | 'INVALID_PAYLOAD'
  | 'STORE_UNAVAILABLE'
  | 'UNEXPECTED_STORE_REPLY'
  | 'UNREADABLE_RESULT'
  | 'LEASE_LOST'
  | 'HANDLER_TIMEOUT'
  | 'RESULT_TOO_LARGE'
  | 'NON_RETRYABLE'
  | 'TOPOLOGY_MISMATCH'
  | 'IDEMPOTENCY_CONFLICT'
  | 'PAYLOAD_MISMATCH'
  | 'RECORD_FAILED'
  | 'REPLICATION_TIMEOUT';

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
export abstract class IdempotencyError<Code extends string = IdempotencyErrorCode> extends Error {
  /** Stable machine-readable code; never changes for a given class. */
  abstract readonly code: Code;
  /** Whether trying the same operation again later can succeed. */
  abstract readonly retryable: boolean;
  /** @internal Brand checked by {@link isIdempotencyError}. */
  readonly [BRAND] = true;

  constructor(message: string, options?: IdempotencyErrorOptions) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
  }
}

/**
 * True when `value` is an {@link IdempotencyError} from any installed copy of this package, the core's or
 * an adapter's (whose `code` is the adapter's own, hence `string`).
 */
export function isIdempotencyError(value: unknown): value is IdempotencyError<string> {
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
 * the adapters dead-letter such messages (docs/design.md#key-sources).
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
 * A payload cannot be fingerprinted (it holds a `bigint`, a function or symbol, a non-finite number, a
 * cycle, or a getter or `toJSON` that throws), or a precomputed `fingerprint` is not 64 hex characters.
 * Thrown before anything is written. Not retryable: the same payload fails the same way.
 */
export class InvalidPayloadError extends IdempotencyError {
  override readonly name = 'InvalidPayloadError' as const;
  readonly code = 'INVALID_PAYLOAD' as const;
  readonly retryable = false;
}

/**
 * A claim a failed store call had written ({@link StoreUnavailableError.writtenClaim}): what giving it back
 * needs. Only a `StoreUnavailableError` makes one (its constructor sets `kind`), so `Idempotency.release`
 * and the kit's `giveBackUnrun` cannot be handed by mistake something else that carries a fencing token and
 * an outcome, such as a run's result or a record read back, whose handler may have run.
 */
export interface WrittenClaim {
  /** Set by the {@link StoreUnavailableError} constructor. */
  readonly kind: 'written-claim';
  /** The claim's fencing token (`release` is fenced by it). */
  readonly fencingToken: number;
  /**
   * How the claim took the key. `ACQUIRED_STALE`: a handler before it may have left partial effects, so a
   * give-back keeps the record stale (`abandoned`). `undefined` (a store that does not say) is taken as
   * `ACQUIRED_STALE`, the side that never hides an earlier run.
   */
  readonly outcome?: 'ACQUIRED' | 'ACQUIRED_STALE';
}

/**
 * The idempotency store did not answer (connection refused or closed, command timed out, cluster down), or
 * refused to write for now (Redis full: `OOM` under `noeviction`; a read-only replica: `READONLY`; unable to
 * persist: `MISCONF`; loading). Retryable. The default policy is to fail closed: nothing is acked, committed or deleted while the store
 * is unavailable (docs/design.md#when-redis-does-not-answer).
 */
export class StoreUnavailableError extends IdempotencyError {
  override readonly name = 'StoreUnavailableError' as const;
  readonly code = 'STORE_UNAVAILABLE' as const;
  readonly retryable = true;
  /**
   * A claim the failed call had already written, which may still hold the key: `RedisIdempotencyStore`
   * with `waitForReplicas` applied the claim of `claim` (or `waitForOutcome`), then its `WAIT`, or the
   * `start` that counts it, went unanswered. Left alone it holds the key until its lease lapses (CONFLICT
   * meanwhile); a claim whose `start` Redis applied has counted an attempt, and the next claim is then
   * `ACQUIRED_STALE` although no handler ran. `Idempotency.run` failing open (`storeFailureMode: 'open'`)
   * runs the handler without its own claim's, then releases it abandoned, so that the next claim is
   * `ACQUIRED_STALE`; otherwise (and for a claim of `run`'s conflict wait, whatever `storeFailureMode`)
   * `run`, `claim` and `waitForOutcome` give it back unrun (`unrunReleaseOptions`: no attempt
   * spent) before they reject, with this field cleared once the give-back was answered (`run` then resolves
   * the CONFLICT it waited on). Still set on the
   * error `claim`, `run` or `waitForOutcome` rejects with (that give-back went unanswered too), no handler
   * ran on it and it can be given back later: `Idempotency.release(id, writtenClaim)`, or the kit's
   * `giveBackUnrun` (again each time the store gate opens). The `storeError` of a fail-open (`UNPROTECTED`)
   * result and of the `failOpen` event never names one: its handler ran.
   * `claimMany` never sets it: a failed batch gives back every claim it wrote itself (its error names no
   * key). `Idempotency.execute` sets it when the `start` or extension before the handler went unanswered
   * (`run` gives that claim back first). `undefined` when the call wrote no claim, cannot know, or gave it
   * back.
   */
  readonly writtenClaim: WrittenClaim | undefined;

  /**
   * @param options - `writtenClaim`: the claim the failed call wrote (its fencing token, and its outcome when
   *   known); stored with `kind: 'written-claim'`.
   */
  constructor(
    message: string,
    options?: IdempotencyErrorOptions & { writtenClaim?: Omit<WrittenClaim, 'kind'> },
  ) {
    super(message, options);
    const written = options?.writtenClaim;
    this.writtenClaim =
      written === undefined
        ? undefined
        : written.outcome === undefined
          ? { kind: 'written-claim', fencingToken: written.fencingToken }
          : { kind: 'written-claim', fencingToken: written.fencingToken, outcome: written.outcome };
  }
}

/**
 * The store answered with a reply shape this version does not know. Not retryable: a bug or version skew.
 * Its subclass {@link UnreadableResultError} (its own `name` and `code`) is a DUPLICATE whose stored result
 * cannot be decoded.
 */
export class UnexpectedReplyError extends IdempotencyError {
  override readonly name: 'UnexpectedReplyError' | 'UnreadableResultError' = 'UnexpectedReplyError';
  readonly code: 'UNEXPECTED_STORE_REPLY' | 'UNREADABLE_RESULT' = 'UNEXPECTED_STORE_REPLY';
  readonly retryable = false;
}

/** The facts of a DUPLICATE claim reply whose stored result could not be decoded ({@link UnreadableResultError}). */
export interface UnreadableDuplicate {
  /** The completed record's fencing token. */
  readonly fencingToken: number;
  /** The attempt that completed it (1 for the first). */
  readonly attempt: number;
  /** When the key completed, in ms since the epoch on the store's clock. */
  readonly completedAtMs: number;
}

/**
 * The key's record is COMPLETED (the claim answered DUPLICATE: the operation is done, the handler did not
 * run), but its stored result cannot be decoded by this version: an unknown encoding prefix (a newer SDK
 * wrote it, met by an older one during a rolling upgrade) or corrupt bytes. Thrown by `Idempotency.settle`,
 * and so by `run` (and a `makeIdempotent` function), which cannot replay a result they cannot read.
 * Not retryable: the same record reads the same way until this version can decode it or the record expires.
 * A subclass of {@link UnexpectedReplyError} (`instanceof` holds), with a `code` of its own.
 *
 * A consumer never needs the stored result: the broker adapters settle such a message as a DUPLICATE (ack,
 * offset resolved, delete) and report the error as a `storeError` event, through the kit's
 * `unreadableDuplicateOf`, which recognises it from any installed copy of this package.
 */
export class UnreadableResultError extends UnexpectedReplyError {
  override readonly name = 'UnreadableResultError' as const;
  override readonly code = 'UNREADABLE_RESULT' as const;
  /** The DUPLICATE the claim answered: the completed record's facts. All 0 when not given. */
  readonly duplicate: UnreadableDuplicate;

  /**
   * @param options - `duplicate`: the DUPLICATE reply's fencing token, attempt and completion time;
   *   `cause`: why decoding failed (the codec's `UnexpectedReplyError`).
   */
  constructor(message: string, options?: IdempotencyErrorOptions & { duplicate?: UnreadableDuplicate }) {
    super(message, options);
    const d = options?.duplicate;
    this.duplicate = {
      fencingToken: d?.fencingToken ?? 0,
      attempt: d?.attempt ?? 0,
      completedAtMs: d?.completedAtMs ?? 0,
    };
  }
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
 * A handler ran longer than `handlerTimeoutMs`. Not thrown: the handler's `signal` aborts with it and the
 * run resolves `released` (or `failed` with `attempts-exhausted` at the last attempt) with this error.
 * Retryable. A handler that ignores its signal may still finish later: make handlers honour it.
 */
export class HandlerTimeoutError extends IdempotencyError {
  override readonly name = 'HandlerTimeoutError' as const;
  readonly code = 'HANDLER_TIMEOUT' as const;
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

/**
 * Thrown by a function wrapped with `makeIdempotent` when another call holds a live claim on the same
 * idempotency key (claim outcome `CONFLICT`, Powertools' "already in progress"). Retryable: call again after
 * `retryAfterMs`; by then the other call has completed (a `DUPLICATE`, its result replayed) or lost its lease.
 */
export class IdempotencyConflictError extends IdempotencyError {
  override readonly name = 'IdempotencyConflictError' as const;
  readonly code = 'IDEMPOTENCY_CONFLICT' as const;
  readonly retryable = true;
  /** The holder's remaining lease in milliseconds, on the store's clock; 0 when unknown. */
  readonly retryAfterMs: number;

  constructor(message: string, options?: IdempotencyErrorOptions & { retryAfterMs?: number }) {
    super(message, options);
    this.retryAfterMs = options?.retryAfterMs ?? 0;
  }
}

/**
 * Thrown by a function wrapped with `makeIdempotent` when its idempotency key was first used with another
 * payload (claim outcome `PAYLOAD_MISMATCH`): a caller bug, the function did not run. Not retryable.
 */
export class PayloadMismatchError extends IdempotencyError {
  override readonly name = 'PayloadMismatchError' as const;
  readonly code = 'PAYLOAD_MISMATCH' as const;
  readonly retryable = false;
}

/**
 * Thrown by a function wrapped with `makeIdempotent` when the record of its idempotency key is FAILED from an
 * earlier call (claim outcome `FAILED`): the function does not run again for this key until the record
 * expires or an operator releases it. Not retryable.
 */
export class RecordFailedError extends IdempotencyError {
  override readonly name = 'RecordFailedError' as const;
  readonly code = 'RECORD_FAILED' as const;
  readonly retryable = false;
  /** The error recorded when the record failed (`Name [CODE]: message`); '' when unknown. */
  readonly recordedError: string;

  constructor(message: string, options?: IdempotencyErrorOptions & { recordedError?: string }) {
    super(message, options);
    this.recordedError = options?.recordedError ?? '';
  }
}

/**
 * A write was applied on the Redis primary, but fewer replicas than `waitForReplicas.replicas` acknowledged
 * it within `waitForReplicas.timeoutMs` (`RedisIdempotencyStore`, `WAIT`). The write stands on the primary;
 * a failover before the replicas catch up may lose it. Retryable: the replicas may catch up. The store call
 * (claim, complete, release, fail) rejects with it, so nothing is acked on its strength.
 */
export class ReplicationTimeoutError extends IdempotencyError {
  override readonly name = 'ReplicationTimeoutError' as const;
  readonly code = 'REPLICATION_TIMEOUT' as const;
  readonly retryable = true;
  /** Replicas that acknowledged the write in time. */
  readonly acknowledgedReplicas: number;
  /** Replicas that had to. */
  readonly requiredReplicas: number;

  constructor(
    message: string,
    options?: IdempotencyErrorOptions & { acknowledgedReplicas?: number; requiredReplicas?: number },
  ) {
    super(message, options);
    this.acknowledgedReplicas = options?.acknowledgedReplicas ?? 0;
    this.requiredReplicas = options?.requiredReplicas ?? 0;
  }
}
