/**
 * Errors of idempotent-consumer. Every error the SDK throws is an {@link IdempotencyError}, with a stable
 * SCREAMING_SNAKE `code`, a `retryable` flag, an optional `cause` and a literal `name`. A brand lets
 * {@link isIdempotencyError} recognise errors thrown by another installed copy of this package, where
 * `instanceof` fails. The model is KafkaJS's `src/errors.js`, with its `retriable` flag and `cause`.
 *
 * @packageDocumentation
 */

const BRAND = Symbol.for('idempotent-consumer.error');

/**
 * Stable machine-readable codes of the core's {@link IdempotencyError}s. An adapter declares the codes of its
 * own errors, such as the Kafka adapter's `KafkaErrorCode` and the SQS adapter's `SqsErrorCode`.
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
  /** Stable machine-readable code. It never changes for a given class. */
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
 * True when `value` is an {@link IdempotencyError} from any installed copy of this package. That includes an
 * adapter's errors, whose `code` is the adapter's own, hence `string`.
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
 * A message or request carries no idempotency key and the missing-key policy is `reject`. Not retryable. The
 * adapters dead-letter such messages, see docs/design.md#key-sources.
 */
export class MissingKeyError extends IdempotencyError {
  override readonly name = 'MissingKeyError' as const;
  readonly code = 'MISSING_IDEMPOTENCY_KEY' as const;
  readonly retryable = false;
}

/** An option is out of its range, such as `leaseMs <= 0`. Thrown by constructors. Not retryable. */
export class InvalidOptionError extends IdempotencyError {
  override readonly name = 'InvalidOptionError' as const;
  readonly code = 'INVALID_OPTION' as const;
  readonly retryable = false;
}

/**
 * A payload cannot be fingerprinted, or a precomputed `fingerprint` is not 64 hex characters. A payload
 * cannot be when it holds a `bigint`, a function, a symbol, a non-finite number or a cycle, or when a getter
 * or `toJSON` throws. Thrown before anything is written. Not retryable, since the same payload fails the same
 * way.
 */
export class InvalidPayloadError extends IdempotencyError {
  override readonly name = 'InvalidPayloadError' as const;
  readonly code = 'INVALID_PAYLOAD' as const;
  readonly retryable = false;
}

/**
 * A claim a failed store call had written, see {@link StoreUnavailableError.writtenClaim}, with what giving
 * it back needs. Only a `StoreUnavailableError` makes one, since its constructor sets `kind`. So
 * `Idempotency.giveBack` and the kit's `giveBackUnrun` cannot be handed something else by mistake, such as a
 * run's result or a record read back, which also carries a fencing token and whose handler may have run.
 */
export interface WrittenClaim {
  /** Set by the {@link StoreUnavailableError} constructor. */
  readonly kind: 'written-claim';
  /** The claim's fencing token, which fences the `release`. */
  readonly fencingToken: number;
  /**
   * How the claim took the key. After `ACQUIRED_STALE` a handler before it may have left partial effects, so
   * a give-back keeps the record stale, `abandoned`. `undefined`, from a store that does not say, is taken as
   * `ACQUIRED_STALE`, the side that never hides an earlier run.
   */
  readonly outcome?: 'ACQUIRED' | 'ACQUIRED_STALE';
}

/**
 * The idempotency store did not answer, or refused to write for now. It did not answer when the connection
 * was refused or closed, a command timed out or the cluster is down. It refuses writes when Redis is full
 * under `noeviction` (`OOM`), is a read-only replica (`READONLY`), cannot persist (`MISCONF`) or is loading.
 * Retryable. The default policy fails closed, so nothing is acked, committed or deleted while the store is
 * unavailable, see docs/design.md#when-redis-does-not-answer.
 */
export class StoreUnavailableError extends IdempotencyError {
  override readonly name = 'StoreUnavailableError' as const;
  readonly code = 'STORE_UNAVAILABLE' as const;
  readonly retryable = true;
  /**
   * A claim the failed call had already written, which may still hold the key. With `waitForReplicas`,
   * `RedisIdempotencyStore` may have applied the claim of `claim` or `waitForOutcome` and then lost the
   * answer to its `WAIT`, or to the `start` that counts it. Left alone, the claim holds the key until its
   * lease lapses, with CONFLICT meanwhile. If Redis applied its `start`, it counted an attempt, and the next
   * claim is `ACQUIRED_STALE` although no handler ran.
   *
   * `Idempotency.run` failing open with `storeFailureMode: 'open'` runs the handler without its own claim's,
   * then releases the claim abandoned so that the next claim is `ACQUIRED_STALE`. Otherwise, and always for a
   * claim of `run`'s conflict wait, `run`, `claim` and `waitForOutcome` give the claim back unrun before they
   * reject, spending no attempt, and clear this field once the give-back was answered. `run` then resolves
   * the CONFLICT it waited on. If the give-back went unanswered too, the field is still set on the error they
   * reject with. No handler ran on that claim, and it can be given back later with
   * `Idempotency.giveBack(id, writtenClaim)` or the kit's `giveBackUnrun`, each time the store gate opens.
   *
   * The `storeError` of a fail-open `UNPROTECTED` result and of the `failOpen` event never names one, since
   * its handler ran. `claimMany` never sets it, because a failed batch gives back every claim it wrote.
   * `Idempotency.execute` sets it when the `start` or the extension before the handler went unanswered, and
   * `run` gives that claim back first. `undefined` when the call wrote no claim, cannot know, or gave it back.
   */
  readonly writtenClaim: WrittenClaim | undefined;

  /**
   * @param options - `writtenClaim` is the claim the failed call wrote, its fencing token and, when known,
   *   its outcome. It is stored with `kind: 'written-claim'`.
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
 * The store answered with a reply shape this version does not know. Not retryable, since it is a bug or
 * version skew. Its subclass {@link UnreadableResultError}, with its own `name` and `code`, is a DUPLICATE
 * whose stored result cannot be decoded.
 */
export class UnexpectedReplyError extends IdempotencyError {
  override readonly name: 'UnexpectedReplyError' | 'UnreadableResultError' = 'UnexpectedReplyError';
  readonly code: 'UNEXPECTED_STORE_REPLY' | 'UNREADABLE_RESULT' = 'UNEXPECTED_STORE_REPLY';
  readonly retryable = false;
}

/** The facts of a DUPLICATE claim reply whose stored result could not be decoded. */
export interface UnreadableDuplicate {
  /** The completed record's fencing token. */
  readonly fencingToken: number;
  /** The attempt that completed it, 1 for the first. */
  readonly attempt: number;
  /** When the key completed, in ms since the epoch on the store's clock. */
  readonly completedAtMs: number;
}

/**
 * The key's record is COMPLETED, so the claim answered DUPLICATE and the handler did not run, but this
 * version cannot decode its stored result. The encoding prefix may be unknown, written by a newer SDK and met
 * by an older one during a rolling upgrade, or the bytes may be corrupt. Thrown by `Idempotency.resultOf`, and
 * so by `run` and a `makeIdempotent` function, which cannot replay a result they cannot read. Not retryable,
 * since the record reads the same way until this version can decode it or it expires. It is a subclass of
 * {@link UnexpectedReplyError}, so `instanceof` holds, with its own `code`.
 *
 * A consumer never needs the stored result. The broker adapters settle such a message as a DUPLICATE, by ack,
 * resolved offset or delete, and report the error as a `storeError` event. The kit's `unreadableDuplicateOf`
 * recognises it from any installed copy of this package.
 */
export class UnreadableResultError extends UnexpectedReplyError {
  override readonly name = 'UnreadableResultError' as const;
  override readonly code = 'UNREADABLE_RESULT' as const;
  /** The DUPLICATE the claim answered, with the completed record's facts. All 0 when not given. */
  readonly duplicate: UnreadableDuplicate;

  /**
   * @param options - `duplicate` is the DUPLICATE reply's fencing token, attempt and completion time. `cause`
   *   says why decoding failed, as the codec's `UnexpectedReplyError`.
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
 * The claim was lost. The record's fencing token is no longer the one this worker holds, because the lease
 * expired and another worker claimed the key, or the record vanished. The handler's `signal` aborts with it.
 */
export class LeaseLostError extends IdempotencyError {
  override readonly name = 'LeaseLostError' as const;
  readonly code = 'LEASE_LOST' as const;
  readonly retryable = true;
}

/**
 * A handler ran longer than `handlerTimeoutMs`. It is not thrown. The handler's `signal` aborts with it, and
 * the run resolves `released` with this error, or `failed` with `attempts-exhausted` at the last attempt.
 * Retryable. A handler that ignores its signal may still finish later, so make handlers honour it.
 */
export class HandlerTimeoutError extends IdempotencyError {
  override readonly name = 'HandlerTimeoutError' as const;
  readonly code = 'HANDLER_TIMEOUT' as const;
  readonly retryable = true;
}

/**
 * A handler's result is larger than `maxResultBytes` after encoding and `onResultTooLarge` is `fail`, or it
 * cannot be serialized as JSON. It is not thrown. The record is written FAILED and the run resolves with
 * `status: 'failed'`, `reason: 'result-too-large'` and this error. So the operation never runs again for this
 * key, and its duplicates get `FAILED`.
 */
export class ResultTooLargeError extends IdempotencyError {
  override readonly name = 'ResultTooLargeError' as const;
  readonly code = 'RESULT_TOO_LARGE' as const;
  readonly retryable = false;
}

/**
 * Throw this from a handler, or wrap another error in it, to mark a failure that must not be retried. The
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

/** A broker queue, exchange or topic exists with arguments that differ from what the adapter needs. */
export class TopologyMismatchError extends IdempotencyError {
  override readonly name = 'TopologyMismatchError' as const;
  readonly code = 'TOPOLOGY_MISMATCH' as const;
  readonly retryable = false;
}

/**
 * Thrown by a function wrapped with `makeIdempotent` when another call holds a live claim on the same
 * idempotency key, the claim outcome `CONFLICT` and Powertools' "already in progress". Retryable. Call again
 * after `retryAfterMs`. By then the other call has completed, and its result is replayed as a `DUPLICATE`, or
 * it has lost its lease.
 */
export class IdempotencyConflictError extends IdempotencyError {
  override readonly name = 'IdempotencyConflictError' as const;
  readonly code = 'IDEMPOTENCY_CONFLICT' as const;
  readonly retryable = true;
  /** The holder's remaining lease in milliseconds, on the store's clock. 0 when unknown. */
  readonly retryAfterMs: number;

  constructor(message: string, options?: IdempotencyErrorOptions & { retryAfterMs?: number }) {
    super(message, options);
    this.retryAfterMs = options?.retryAfterMs ?? 0;
  }
}

/**
 * Thrown by a function wrapped with `makeIdempotent` when its idempotency key was first used with another
 * payload, the claim outcome `PAYLOAD_MISMATCH`. It is a caller bug, and the function did not run. Not
 * retryable.
 */
export class PayloadMismatchError extends IdempotencyError {
  override readonly name = 'PayloadMismatchError' as const;
  readonly code = 'PAYLOAD_MISMATCH' as const;
  readonly retryable = false;
}

/**
 * Thrown by a function wrapped with `makeIdempotent` when the record of its idempotency key is FAILED from an
 * earlier call, the claim outcome `FAILED`. The function does not run again for this key until the record
 * expires or an operator releases it. Not retryable.
 */
export class RecordFailedError extends IdempotencyError {
  override readonly name = 'RecordFailedError' as const;
  readonly code = 'RECORD_FAILED' as const;
  readonly retryable = false;
  /** The error recorded when the record failed, as `Name [CODE]: message`. '' when unknown. */
  readonly recordedError: string;

  constructor(message: string, options?: IdempotencyErrorOptions & { recordedError?: string }) {
    super(message, options);
    this.recordedError = options?.recordedError ?? '';
  }
}

/**
 * A write of `RedisIdempotencyStore` was applied on the Redis primary, but fewer replicas than
 * `waitForReplicas.replicas` acknowledged it to `WAIT` within `waitForReplicas.timeoutMs`. The write stands
 * on the primary, and a failover before the replicas catch up may lose it. Retryable, since the replicas may
 * catch up. The store call, claim, complete, release or fail, rejects with it, so nothing is acked on its
 * strength.
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
