import { checkLeaseMs, checkNonNegativeInteger, checkPositiveInteger } from './option-checks';

/**
 * The runner options a consumer may set for its own messages, overriding the runner's for every run it
 * makes. They are the same four in every adapter, with the same names, units and ranges. An adapter's
 * options type extends it, and the runner's `RunOptions` does too.
 */
export interface RunOverrides {
  /**
   * The claim's lease, in milliseconds (an integer >= 1, at most 2^52).
   * @defaultValue the runner's `leaseMs`
   */
  readonly leaseMs?: number;
  /** Most attempts per idempotency key (an integer >= 1). @defaultValue the runner's `maxAttempts` */
  readonly maxAttempts?: number;
  /**
   * How long a run that meets CONFLICT waits for the holder's outcome, in milliseconds (an integer
   * >= 0; 0: no wait). @defaultValue the runner's `conflictWaitMs`
   */
  readonly conflictWaitMs?: number;
  /** Longest a handler may run, in milliseconds (an integer >= 0; 0: no limit). @defaultValue the runner's `handlerTimeoutMs` */
  readonly handlerTimeoutMs?: number;
}

/**
 * Checks the overrides that are set with the runner's own ranges: `leaseMs` (at most 2^52) and `maxAttempts`
 * integers >= 1, `conflictWaitMs` and `handlerTimeoutMs` integers >= 0. `Idempotency.run`, `claim`, `claimMany`
 * and `execute` make this check on every call; an adapter makes it when it is built, so a bad value is
 * reported then rather than at its first message.
 * @returns `overrides` itself.
 * @throws `InvalidOptionError` (`<name> must be an integer >= <min>, got <value>`).
 */
export function checkRunOverrides<T extends RunOverrides>(overrides: T): T {
  if (overrides.leaseMs !== undefined) checkLeaseMs('leaseMs', overrides.leaseMs);
  if (overrides.maxAttempts !== undefined) checkPositiveInteger('maxAttempts', overrides.maxAttempts);
  if (overrides.conflictWaitMs !== undefined)
    checkNonNegativeInteger('conflictWaitMs', overrides.conflictWaitMs);
  if (overrides.handlerTimeoutMs !== undefined) {
    checkNonNegativeInteger('handlerTimeoutMs', overrides.handlerTimeoutMs);
  }
  return overrides;
}

/**
 * The {@link RunOverrides} fields of an adapter's options that are set, as a new object to pass to the
 * runner (an unset field leaves the runner's own value in place; other fields of `options` are left out).
 */
export function pickRunOverrides(options: RunOverrides): RunOverrides {
  const picked: { -readonly [K in keyof RunOverrides]: RunOverrides[K] } = {};
  if (options.leaseMs !== undefined) picked.leaseMs = options.leaseMs;
  if (options.maxAttempts !== undefined) picked.maxAttempts = options.maxAttempts;
  if (options.conflictWaitMs !== undefined) picked.conflictWaitMs = options.conflictWaitMs;
  if (options.handlerTimeoutMs !== undefined) picked.handlerTimeoutMs = options.handlerTimeoutMs;
  return picked;
}
