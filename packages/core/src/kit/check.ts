import type { BackoffOptions } from '../backoff';
import {
  checkAtMost,
  checkBackoffOptions,
  checkFiniteNonNegative,
  checkFunction,
  checkLeaseMs,
  checkNonEmptyString,
  checkNonNegativeInteger,
  checkOneOf,
  checkPositiveInteger,
} from './option-checks';
import { checkRunOverrides, pickRunOverrides, type RunOverrides } from './run-overrides';
import { checkStopTimeoutMs } from './stop-timeout';
import { DEFAULT_STORE_PROBE_BACKOFF } from './store-gate';
import { checkTelemetryOption } from './telemetry/telemetry-options';

/**
 * The option checks of every consumer, one per concept, so the same option is checked the same way in
 * every broker package. Each check throws an `InvalidOptionError` naming the option, and returns the
 * value, or `fallback` when the value is `undefined`.
 */
export const check = Object.freeze({
  /** An integer >= 1. */
  positiveInteger: checkPositiveInteger,
  /** An integer >= 0. */
  nonNegativeInteger: checkNonNegativeInteger,
  /** A finite number >= `min` (0 by default). */
  finiteNonNegative: checkFiniteNonNegative,
  /** A lease in milliseconds: an integer >= 1 and at most 2^52. */
  leaseMs: checkLeaseMs,
  /** A number at most `max`. */
  atMost: checkAtMost,
  /** One of `allowed`. */
  oneOf: checkOneOf,
  /** A non-empty string, of at most `maxBytes` UTF-8 bytes when given. */
  nonEmptyString: checkNonEmptyString,
  /** A function. */
  function: checkFunction,
  /** A backoff: each field given is checked, the rest come from `defaults`. */
  backoff: checkBackoffOptions,
  /** The store probe's backoff: each field given is checked, the rest are the defaults of the store gate. */
  storeProbeBackoff: (value: BackoffOptions | undefined) =>
    checkBackoffOptions('storeProbeBackoff', value, DEFAULT_STORE_PROBE_BACKOFF),
  /** `stopTimeoutMs`: an integer from 0 to 2^31 - 1, 30 s by default. */
  stopTimeoutMs: checkStopTimeoutMs,
  /** The `telemetry` option: `false`, or the tracer and meter providers to use. */
  telemetry: checkTelemetryOption,
  /** `conflictWaitMs`: how long a CONFLICT waits for its holder, an integer >= 0 (ms). */
  conflictWaitMs: (value: unknown, fallback = 5000) =>
    checkNonNegativeInteger('conflictWaitMs', value, fallback),
  /** `maxConflictDelayMs`: the longest delay of a CONFLICT still held after the wait, an integer >= 1 (ms). */
  maxConflictDelayMs: (value: unknown) => checkPositiveInteger('maxConflictDelayMs', value, 5000),
  /** The runner options a consumer may override, checked, as a new object holding only those given. */
  runOverrides: (options: RunOverrides): RunOverrides => pickRunOverrides(checkRunOverrides(options)),
});
