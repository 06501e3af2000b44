import { InvalidOptionError, isIdempotencyError } from '../errors';
import { heartbeatIntervalFor } from '../kit/heartbeat';
import {
  checkLeaseMs,
  checkNonNegativeInteger,
  checkOneOf,
  checkPositiveInteger,
} from '../kit/option-checks';
import { checkRunOverrides, type RunOverrides } from '../kit/run-overrides';
import type { ResultOptions } from './result-codec';

/**
 * Options of an {@link Idempotency} runner. Every field has a default, given by its `@defaultValue`.
 * docs/design.md explains them under #the-record-and-its-states and #outcome-to-broker-action.
 */
export interface IdempotencyOptions extends ResultOptions {
  /**
   * How long a claim holds without a heartbeat, in milliseconds on the store's clock. Make it at least the
   * broker's redelivery timer, such as the SQS visibility timeout or the Kafka session timeout. At most 2^52,
   * about 142,000 years. @defaultValue 30000
   */
  leaseMs?: number;
  /**
   * How often the lease is extended while a handler runs, in milliseconds. @defaultValue `leaseMs / 3`
   */
  heartbeatIntervalMs?: number;
  /**
   * How long a finished record is kept, completed, released or failed, and how long an in-progress record
   * outlives its lease, in milliseconds. Duplicates that arrive later run again. 24 hours by default.
   * @defaultValue 86400000
   */
  retentionMs?: number;
  /**
   * Most attempts per idempotency key. The attempt that reaches it records FAILED instead of releasing. A
   * worker that dies mid-handler uses an attempt too, but a `claimMany` reservation whose handler never
   * started does not. An attempt counts when the store applies the claim or the `start`. So a claim whose
   * reply was lost to the store's `commandTimeoutMs` used one without running the handler, see
   * `RedisIdempotencyStoreOptions.commandTimeoutMs`. @defaultValue 5
   */
  maxAttempts?: number;
  /**
   * Whether a handler error may be retried. By default an error with `retryable === false`, such as
   * `NonRetryableError`, is not retryable, and every other error is.
   */
  isRetryable?: (error: unknown) => boolean;
  /**
   * What to do when the store does not answer a claim. `closed` rejects with `StoreUnavailableError` and runs
   * nothing, and the adapters then pause and ack nothing. `open` runs the handler without protection and
   * emits `failOpen`, so duplicates may run twice. A store that stops answering during a `conflictWaitMs`
   * wait runs nothing either way, see `Idempotency.run`. @defaultValue `'closed'`
   */
  storeFailureMode?: 'closed' | 'open';
  /**
   * How many times a write after the handler, a complete, release or fail, is tried while the store is
   * unavailable. The backoff between tries grows exponentially from 100 ms up to 2 s. @defaultValue 8
   */
  writeAttempts?: number;
  /**
   * How long `run` waits for the holder's outcome when it meets CONFLICT, in milliseconds, through
   * `IdempotencyStore.waitForOutcome`. The holder's complete answers DUPLICATE with its stored result within
   * a few milliseconds, and its failure answers FAILED. Its release, or a lapsed lease, lets this call claim
   * and run. CONFLICT comes back only when the bound passes, and 0 answers CONFLICT at once. It adds nothing
   * to the path without conflicts. @defaultValue 0
   */
  conflictWaitMs?: number;
  /**
   * Longest a handler may run, in milliseconds, where 0 means no limit. Past it the handler's `signal` aborts
   * with a `HandlerTimeoutError`, and the claim is released at once without waiting for the handler to
   * return. That is retryable, or FAILED with `attempts-exhausted` at the last attempt. A handler that
   * ignores its signal may still finish its side effect later. The release is marked abandoned, so the next
   * claim of the key is `ACQUIRED_STALE`, never `ACQUIRED`, and its handler learns that the earlier attempt
   * may be partial or still running. The FAILED record of the last attempt is marked abandoned too. Later
   * claims answer FAILED, and the claim after an operator's release, by `RedisIdempotencyAdmin.release` or
   * the CLI's `release`, is `ACQUIRED_STALE`. @defaultValue 0
   */
  handlerTimeoutMs?: number;
}

/** {@link IdempotencyOptions} with every default applied. */
export type ResolvedIdempotencyOptions = Required<IdempotencyOptions>;

/**
 * A user's `isRetryable` made safe to call from any decision. A predicate that throws, or answers anything
 * but `false`, counts the error as retryable, since a bug in the predicate must not stop the decision that
 * needs it. The resolved options hold this version, so the runner and every adapter use the same one.
 */
function safeIsRetryable(isRetryable: (error: unknown) => boolean): (error: unknown) => boolean {
  return (error) => {
    try {
      return isRetryable(error) !== false;
    } catch {
      return true;
    }
  };
}

/** The default of {@link IdempotencyOptions.isRetryable}. */
export function defaultIsRetryable(error: unknown): boolean {
  if (isIdempotencyError(error)) return error.retryable;
  return (error as { retryable?: unknown } | null)?.retryable !== false;
}

/** A number >= 0, fractions and `Infinity` allowed. `compressAboveBytes: Infinity` never compresses. */
function checkAtLeastZero(name: string, value: number): number {
  if (typeof value !== 'number' || Number.isNaN(value) || value < 0) {
    throw new InvalidOptionError(`${name} must be a number >= 0, got ${String(value)}`);
  }
  return value;
}

/**
 * Applies defaults and checks ranges.
 * @throws {@link InvalidOptionError} when an option is out of range.
 */
export function resolveOptions(options: IdempotencyOptions = {}): ResolvedIdempotencyOptions {
  const leaseMs = checkLeaseMs('leaseMs', options.leaseMs, 30_000);
  const resolved: ResolvedIdempotencyOptions = {
    leaseMs,
    heartbeatIntervalMs: checkPositiveInteger(
      'heartbeatIntervalMs',
      options.heartbeatIntervalMs,
      heartbeatIntervalFor(leaseMs),
    ),
    retentionMs: checkPositiveInteger('retentionMs', options.retentionMs, 86_400_000),
    maxAttempts: checkPositiveInteger('maxAttempts', options.maxAttempts, 5),
    isRetryable: safeIsRetryable(options.isRetryable ?? defaultIsRetryable),
    storeFailureMode: checkOneOf('storeFailureMode', options.storeFailureMode, ['closed', 'open'], 'closed'),
    writeAttempts: checkPositiveInteger('writeAttempts', options.writeAttempts, 8),
    conflictWaitMs: checkNonNegativeInteger('conflictWaitMs', options.conflictWaitMs, 0),
    handlerTimeoutMs: checkNonNegativeInteger('handlerTimeoutMs', options.handlerTimeoutMs, 0),
    maxResultBytes: checkPositiveInteger('maxResultBytes', options.maxResultBytes, 65_536),
    onResultTooLarge: checkOneOf('onResultTooLarge', options.onResultTooLarge, ['omit', 'fail'], 'omit'),
    compressAboveBytes: checkAtLeastZero('compressAboveBytes', options.compressAboveBytes ?? 1024),
  };
  if (resolved.heartbeatIntervalMs >= leaseMs) {
    throw new InvalidOptionError(
      `heartbeatIntervalMs (${resolved.heartbeatIntervalMs}) must be below leaseMs (${leaseMs})`,
    );
  }
  return resolved;
}

/**
 * Checks the per-call options of `run`, `claim`, `claimMany` and `execute`, the `RunOptions`. The overrides
 * are checked with the runner's own ranges by the kit's `checkRunOverrides`, and `signal`, when given, must
 * be an `AbortSignal`.
 * @throws {@link InvalidOptionError} when an option is out of range.
 */
export function checkRunOptions(options: RunOverrides & { signal?: unknown }): void {
  if (options.signal !== undefined && !isAbortSignal(options.signal)) {
    throw new InvalidOptionError(
      `signal must be an AbortSignal, got ${options.signal === null ? 'null' : typeof options.signal}`,
    );
  }
  checkRunOverrides(options);
}

/** An `AbortSignal`, also one from another realm, checked by shape rather than `instanceof`. */
function isAbortSignal(value: unknown): value is AbortSignal {
  const v = value as Partial<AbortSignal> | null;
  return (
    typeof v === 'object' &&
    v !== null &&
    typeof v.aborted === 'boolean' &&
    typeof v.addEventListener === 'function' &&
    typeof v.removeEventListener === 'function'
  );
}
