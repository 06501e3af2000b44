import { InvalidOptionError, isIdempotencyError } from '../errors';
import type { ResultOptions } from './result-codec';

/**
 * Options of an {@link Idempotency} runner. Every field has a default; see each `@defaultValue`.
 * Sources: DESIGN.md ("The record and its states", "Outcome → broker action").
 */
export interface IdempotencyOptions extends ResultOptions {
  /**
   * How long a claim holds without a heartbeat, in milliseconds on the store's clock. Make it at least
   * the broker's redelivery timer (SQS visibility timeout, Kafka session timeout). @defaultValue 30000
   */
  leaseMs?: number;
  /**
   * How often the lease is extended while a handler runs, in milliseconds. @defaultValue `leaseMs / 3`
   */
  heartbeatIntervalMs?: number;
  /**
   * How long a finished record (completed, released, failed) is kept, and how long an in-progress record
   * outlives its lease, in milliseconds. Duplicates that arrive later run again. @defaultValue 86400000 (24 h)
   */
  retentionMs?: number;
  /**
   * Most attempts per idempotency key; the attempt that reaches it records FAILED instead of releasing.
   * A worker that dies mid-handler uses an attempt too. @defaultValue 5
   */
  maxAttempts?: number;
  /**
   * Whether a handler error may be retried. @defaultValue errors with `retryable === false` (such as
   * `NonRetryableError`) are not retryable; every other error is.
   */
  isRetryable?: (error: unknown) => boolean;
  /**
   * What to do when the store does not answer a claim: `closed` rejects with `StoreUnavailableError` and
   * runs nothing (the adapters then pause and ack nothing); `open` runs the handler without protection and
   * emits `failOpen` (duplicates may then run twice). @defaultValue `'closed'`
   */
  storeFailureMode?: 'closed' | 'open';
  /**
   * How many times a write after the handler (complete, release, fail) is tried while the store is
   * unavailable, with exponential backoff from 100 ms up to 2 s between tries. @defaultValue 8
   */
  writeAttempts?: number;
}

/** {@link IdempotencyOptions} with every default applied. */
export type ResolvedIdempotencyOptions = Required<IdempotencyOptions>;

/** The default of {@link IdempotencyOptions.isRetryable}. */
export function defaultIsRetryable(error: unknown): boolean {
  if (isIdempotencyError(error)) return error.retryable;
  return (error as { retryable?: unknown } | null)?.retryable !== false;
}

function check(name: string, value: number, min: number, integer = true): number {
  if (
    typeof value !== 'number' ||
    Number.isNaN(value) ||
    value < min ||
    (integer && !Number.isSafeInteger(value))
  ) {
    throw new InvalidOptionError(
      `${name} must be ${integer ? 'an integer' : 'a number'} >= ${min}, got ${value}`,
    );
  }
  return value;
}

/**
 * Applies defaults and checks ranges.
 * @throws {@link InvalidOptionError} when an option is out of range.
 */
export function resolveOptions(options: IdempotencyOptions = {}): ResolvedIdempotencyOptions {
  const leaseMs = check('leaseMs', options.leaseMs ?? 30_000, 1);
  const resolved: ResolvedIdempotencyOptions = {
    leaseMs,
    heartbeatIntervalMs: check(
      'heartbeatIntervalMs',
      options.heartbeatIntervalMs ?? Math.max(1, Math.floor(leaseMs / 3)),
      1,
    ),
    retentionMs: check('retentionMs', options.retentionMs ?? 86_400_000, 1),
    maxAttempts: check('maxAttempts', options.maxAttempts ?? 5, 1),
    isRetryable: options.isRetryable ?? defaultIsRetryable,
    storeFailureMode: options.storeFailureMode ?? 'closed',
    writeAttempts: check('writeAttempts', options.writeAttempts ?? 8, 1),
    maxResultBytes: check('maxResultBytes', options.maxResultBytes ?? 65_536, 1),
    onResultTooLarge: options.onResultTooLarge ?? 'omit',
    compressAboveBytes: check('compressAboveBytes', options.compressAboveBytes ?? 1024, 0, false),
  };
  if (resolved.heartbeatIntervalMs >= leaseMs) {
    throw new InvalidOptionError(
      `heartbeatIntervalMs (${resolved.heartbeatIntervalMs}) must be below leaseMs (${leaseMs})`,
    );
  }
  if (resolved.storeFailureMode !== 'closed' && resolved.storeFailureMode !== 'open') {
    throw new InvalidOptionError(
      `storeFailureMode must be 'closed' or 'open', got ${String(resolved.storeFailureMode)}`,
    );
  }
  if (resolved.onResultTooLarge !== 'omit' && resolved.onResultTooLarge !== 'fail') {
    throw new InvalidOptionError(
      `onResultTooLarge must be 'omit' or 'fail', got ${String(resolved.onResultTooLarge)}`,
    );
  }
  return resolved;
}

/**
 * Checks the per-call overrides of `run`, `claim`, `claimMany` and `execute` (`RunOptions`) with the same
 * ranges as the runner's options: `leaseMs` and `maxAttempts` are integers >= 1 when given.
 * @throws {@link InvalidOptionError} when an override is out of range.
 */
export function checkRunOverrides(options: { leaseMs?: number; maxAttempts?: number }): void {
  if (options.leaseMs !== undefined) check('leaseMs', options.leaseMs, 1);
  if (options.maxAttempts !== undefined) check('maxAttempts', options.maxAttempts, 1);
}
