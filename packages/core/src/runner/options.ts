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
 * Options of an {@link Idempotency} runner. Every field has a default; see each `@defaultValue`.
 * Sources: docs/design.md (#the-record-and-its-states, #outcome-to-broker-action).
 */
export interface IdempotencyOptions extends ResultOptions {
  /**
   * How long a claim holds without a heartbeat, in milliseconds on the store's clock. Make it at least
   * the broker's redelivery timer (SQS visibility timeout, Kafka session timeout). At most 2^52
   * (about 142,000 years). @defaultValue 30000
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
   * A worker that dies mid-handler uses an attempt too; a reservation (`claimMany`) whose handler never
   * started does not. An attempt counts when the store applies the claim (or `start`): a claim whose reply
   * was lost to the store's `commandTimeoutMs` used one without running the handler (see
   * `RedisIdempotencyStoreOptions.commandTimeoutMs`). @defaultValue 5
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
   * emits `failOpen` (duplicates may then run twice). Not for a store that stops answering during a
   * `conflictWaitMs` wait: that runs nothing either way (`Idempotency.run`). @defaultValue `'closed'`
   */
  storeFailureMode?: 'closed' | 'open';
  /**
   * How many times a write after the handler (complete, release, fail) is tried while the store is
   * unavailable, with exponential backoff from 100 ms up to 2 s between tries. @defaultValue 8
   */
  writeAttempts?: number;
  /**
   * How long `run` waits for the holder's outcome when it meets CONFLICT, in milliseconds
   * (`IdempotencyStore.waitForOutcome`): the holder's complete answers DUPLICATE with its stored result
   * within a few milliseconds, its failure FAILED, its release (or a lapsed lease) lets this call claim
   * and run; CONFLICT comes back only when the bound passes. 0 answers CONFLICT at once. Adds nothing to
   * the path without conflicts. @defaultValue 0
   */
  conflictWaitMs?: number;
  /**
   * Longest a handler may run, in milliseconds; 0: no limit. When it is exceeded the handler's `signal`
   * aborts with a `HandlerTimeoutError` and the claim is released at once (retryable; FAILED with
   * `attempts-exhausted` at the last attempt), without waiting for the handler to return: a handler that
   * ignores its signal may still finish its side effect after that. The release is marked abandoned, so
   * the next claim of the key is `ACQUIRED_STALE` (its handler learns that the earlier attempt may be
   * partial or still running), never `ACQUIRED`. The FAILED record of the last attempt is marked abandoned
   * too: later claims answer FAILED, and the claim after an operator's release
   * (`RedisIdempotencyAdmin.release`, the CLI's `release`) is `ACQUIRED_STALE`. @defaultValue 0
   */
  handlerTimeoutMs?: number;
}

/** {@link IdempotencyOptions} with every default applied. */
export type ResolvedIdempotencyOptions = Required<IdempotencyOptions>;

/**
 * A user's `isRetryable` made safe to call from any decision: a predicate that throws, or answers anything
 * but `false`, counts the error as retryable (a bug in the predicate must not stop the decision that
 * needs it). The resolved options hold this version, so the runner and every adapter use the same one.
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

/** A number >= 0, fractions and `Infinity` allowed (`compressAboveBytes: Infinity` never compresses). */
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
 * Checks the per-call options of `run`, `claim`, `claimMany` and `execute` (`RunOptions`): the overrides
 * with the runner's own ranges (the kit's `checkRunOverrides`), and `signal` an `AbortSignal`, when given.
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

/** An `AbortSignal`, also one from another realm (checked by shape, not `instanceof`). */
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
