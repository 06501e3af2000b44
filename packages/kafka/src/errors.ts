import { IdempotencyError, isIdempotencyError } from '@idempotent-consumer/core';

/**
 * Stable machine-readable codes of the Kafka adapter's own errors (the core's are
 * {@link @idempotent-consumer/core!IdempotencyErrorCode}).
 */
export type KafkaErrorCode = 'PARTITION_PAUSED';

/**
 * Thrown by the `eachMessage` wrapper, after it paused the partition, to keep KafkaJS from resolving the
 * message's offset: a normal return would resolve it (KafkaJS `runner.js`, `processEachMessage`), and a
 * throw is the only other way out of `eachMessage`. The partition resumes after `delayMs` (or when the
 * idempotency store answers again), and the message is fetched again from its unresolved offset.
 *
 * Retryable, and deliberately neither a `TypeError` nor a `KafkaJSNonRetriableError`: KafkaJS stops a
 * consumer for good on those. Each throw costs one retry of KafkaJS's `retry` budget, which is why the
 * wrapper waits short delays inline (heartbeating) and throws only for longer ones.
 */
export class PartitionPausedError extends IdempotencyError<KafkaErrorCode> {
  /**
   * True for every error `partitionPausedError` makes, including the variant built on KafkaJS's
   * `KafkaJSError` (an idempotency error with the code `PARTITION_PAUSED`).
   */
  static override [Symbol.hasInstance](value: unknown): boolean {
    return isIdempotencyError(value) && value.code === 'PARTITION_PAUSED';
  }

  override readonly name = 'PartitionPausedError' as const;
  readonly code = 'PARTITION_PAUSED' as const;
  readonly retryable = true;
  /** KafkaJS reads `retriable` (its spelling) to decide whether to retry. */
  readonly retriable = true;

  constructor(
    message: string,
    /** The paused topic. */
    readonly topic: string,
    /** The paused partition. */
    readonly partition: number,
    /** How long the partition stays paused, in milliseconds; `undefined` until the store answers. */
    readonly delayMs: number | undefined,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/** Names KafkaJS treats as unrecoverable: a consumer whose handler throws one stops for good. */
const FATAL_NAMES = new Set([
  'TypeError',
  'RangeError',
  'ReferenceError',
  'SyntaxError',
  'KafkaJSNonRetriableError',
]);

/**
 * Group errors KafkaJS's runner handles itself by rejoining the group (`isRebalancing` in KafkaJS
 * `src/errors.js`, and the `UNKNOWN_MEMBER_ID` branch of `src/consumer/runner.js`), whatever their
 * `retriable` flag says.
 */
const REJOIN_TYPES = new Set([
  'REBALANCE_IN_PROGRESS',
  'NOT_COORDINATOR_FOR_GROUP',
  'ILLEGAL_GENERATION',
  'UNKNOWN_MEMBER_ID',
]);

/**
 * Whether KafkaJS would stop the consumer for good on this error (KafkaJS `src/retry/index.js`: an
 * unrecoverable name or `retriable === false`), except the group errors its runner answers by rejoining.
 * The wrappers never let such an error escape.
 */
export function isFatalToConsumer(error: unknown): boolean {
  const e = error as { name?: unknown; retriable?: unknown; type?: unknown } | null;
  if (typeof e !== 'object' || e === null) return true;
  if (REJOIN_TYPES.has(String(e.type))) return false;
  return FATAL_NAMES.has(String(e.name)) || e.retriable === false;
}

/** `Symbol.for` brand of the core's errors (`isIdempotencyError`). */
const BRAND = Symbol.for('idempotent-consumer.error');

type KafkaJsErrorClass = new (message: string, options: { retriable: boolean }) => Error;
let kafkaJsError: KafkaJsErrorClass | null | undefined;

/**
 * KafkaJS's `KafkaJSError` when `kafkajs` (an optional peer) can be loaded from here, else `null`.
 * Loaded lazily, once; the wrappers never need it.
 */
function kafkaJsErrorClass(): KafkaJsErrorClass | null {
  if (kafkaJsError === undefined) {
    try {
      // An optional peer, loaded only if installed.
      kafkaJsError = (require('kafkajs') as { KafkaJSError?: KafkaJsErrorClass }).KafkaJSError ?? null;
    } catch {
      kafkaJsError = null;
    }
  }
  return kafkaJsError;
}

/**
 * The {@link PartitionPausedError} the `eachMessage` wrapper throws. When `kafkajs` is installed it is
 * built on KafkaJS's own `KafkaJSError` (retriable), which KafkaJS's runner does not log as
 * "Error when calling eachMessage" at level ERROR with a stack (it logs only errors that are not
 * `KafkaJSError`s; KafkaJS `src/consumer/runner.js`, `processEachMessage`): an expected pause is then
 * quiet, and the wrapper's own `retryScheduled` / `storeUnavailable` event says why. It is still a
 * `PartitionPausedError` (`instanceof`, `code`, `retryable`, `isIdempotencyError`).
 */
export function partitionPausedError(
  message: string,
  topic: string,
  partition: number,
  delayMs: number | undefined,
): PartitionPausedError {
  const Base = kafkaJsErrorClass();
  if (Base === null) return new PartitionPausedError(message, topic, partition, delayMs);
  const error = new Base(message, { retriable: true });
  Object.assign(error, {
    name: 'PartitionPausedError',
    code: 'PARTITION_PAUSED',
    retryable: true,
    topic,
    partition,
    delayMs,
    [BRAND]: true,
  });
  return error as PartitionPausedError;
}
