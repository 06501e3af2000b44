import type { BackoffOptions } from '../backoff';
import { InvalidOptionError } from '../errors';

/**
 * Checks of single options, shared by the adapters' option resolvers so that the same kind of option is
 * checked the same way, with the same message, in every package. Each takes the option's name (used in
 * the message) and its value, and an optional `fallback` used when the value is `undefined`; it returns
 * the value (or the fallback) and throws `InvalidOptionError` when it is out of range. A value that
 * is `undefined` without a fallback is out of range (a required option).
 *
 * @packageDocumentation
 */

/** How a value reads in an error message: strings quoted, everything else as `String()` does it. */
function show(value: unknown): string {
  if (typeof value === 'string') return `'${value}'`;
  try {
    return String(value);
  } catch {
    return typeof value;
  }
}

/**
 * An integer >= 1 that JavaScript represents exactly (`Number.isSafeInteger`): counts (`prefetch`,
 * `maxAttempts`) and durations that must not be 0 (`leaseMs`).
 * @throws `InvalidOptionError` `<name> must be an integer >= 1, got <value>`.
 */
export function checkPositiveInteger(name: string, value: unknown, fallback?: number): number {
  return checkInteger(name, value, 1, fallback);
}

/**
 * The longest lease a claim may hold, in milliseconds: 2^52 (about 142,000 years). A store answers the
 * lease's end as its clock plus the lease (`leaseExpiresAtMs`), which must stay an exact JavaScript
 * integer (below 2^53): a longer lease was written to Redis, and its reply then refused as unexpected,
 * which left the key IN_PROGRESS for the length of the lease.
 */
export const MAX_LEASE_MS = 2 ** 52;

/**
 * A lease in milliseconds (`leaseMs`): an integer >= 1 and at most {@link MAX_LEASE_MS}.
 * @throws `InvalidOptionError` `<name> must be an integer >= 1, got <value>`, or
 *   `<name> must be at most 2^52 (4503599627370496) ms, got <value>`.
 */
export function checkLeaseMs(name: string, value: unknown, fallback?: number): number {
  const v = checkPositiveInteger(name, value, fallback);
  if (v > MAX_LEASE_MS) {
    throw new InvalidOptionError(`${name} must be at most 2^52 (${MAX_LEASE_MS}) ms, got ${v}`);
  }
  return v;
}

/**
 * An integer >= 0 that JavaScript represents exactly: durations where 0 means "none" (`conflictWaitMs`,
 * `handlerTimeoutMs`).
 * @throws `InvalidOptionError` `<name> must be an integer >= 0, got <value>`.
 */
export function checkNonNegativeInteger(name: string, value: unknown, fallback?: number): number {
  return checkInteger(name, value, 0, fallback);
}

function checkInteger(name: string, value: unknown, min: number, fallback: number | undefined): number {
  const v = value === undefined ? fallback : value;
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < min) {
    throw new InvalidOptionError(`${name} must be an integer >= ${min}, got ${show(v)}`);
  }
  return v;
}

/**
 * `value` when it is at most `max`: the upper bound of a number already checked by one of the above
 * (`waitTimeSeconds` up to SQS's 20, a delay up to a Node timer's longest).
 * @throws `InvalidOptionError` `<name> must be at most <max>, got <value>`.
 */
export function checkAtMost(name: string, value: number, max: number): number {
  if (value > max) throw new InvalidOptionError(`${name} must be at most ${max}, got ${show(value)}`);
  return value;
}

/**
 * A finite number >= `min` (default 0), fractions allowed: ratios and durations that need not be whole.
 * @param min - the least value allowed. @defaultValue 0
 * @throws `InvalidOptionError` `<name> must be a finite number >= <min>, got <value>`.
 */
export function checkFiniteNonNegative(name: string, value: unknown, fallback?: number, min = 0): number {
  const v = value === undefined ? fallback : value;
  if (typeof v !== 'number' || !Number.isFinite(v) || v < Math.max(0, min)) {
    throw new InvalidOptionError(`${name} must be a finite number >= ${Math.max(0, min)}, got ${show(v)}`);
  }
  return v;
}

/**
 * One of `allowed` (compared with `===`): policies such as `missingKey: 'dead-letter' | 'process'`.
 * @throws `InvalidOptionError` `<name> must be 'a' or 'b', got <value>`.
 */
export function checkOneOf<const T>(name: string, value: unknown, allowed: readonly T[], fallback?: T): T {
  const v = value === undefined ? fallback : value;
  if (!allowed.includes(v as T)) {
    const list = allowed.map(show);
    const choices = list.length > 1 ? `${list.slice(0, -1).join(', ')} or ${list.at(-1)}` : list.join('');
    throw new InvalidOptionError(`${name} must be ${choices}, got ${show(v)}`);
  }
  return v as T;
}

/**
 * A non-empty string, at most `maxBytes` bytes in UTF-8 when given (AMQP names: 255): queue names,
 * scopes, topics.
 * @throws `InvalidOptionError` `<name> must be a non-empty string[ of at most <maxBytes> bytes], got <value>`.
 */
export function checkNonEmptyString(
  name: string,
  value: unknown,
  fallback?: string,
  maxBytes?: number,
): string {
  const v = value === undefined ? fallback : value;
  if (
    typeof v !== 'string' ||
    v.length === 0 ||
    (maxBytes !== undefined && Buffer.byteLength(v, 'utf8') > maxBytes)
  ) {
    const bound = maxBytes === undefined ? '' : ` of at most ${maxBytes} bytes`;
    throw new InvalidOptionError(`${name} must be a non-empty string${bound}, got ${show(v)}`);
  }
  return v;
}

/**
 * A function: key extractors, fingerprint selectors, callbacks.
 * @throws `InvalidOptionError` `<name> must be a function, got <type>`.
 */
export function checkFunction<F extends (...args: never[]) => unknown>(
  name: string,
  value: unknown,
  fallback?: F,
): F {
  const v = value === undefined ? fallback : value;
  if (typeof v !== 'function') {
    throw new InvalidOptionError(`${name} must be a function, got ${v === null ? 'null' : typeof v}`);
  }
  return v as F;
}

/**
 * {@link BackoffOptions} (`retryBackoff`, `storeProbeBackoff`), merged over `defaults` field by field and
 * checked: `baseMs` and `maxMs` finite numbers >= 0 with `maxMs >= baseMs`, `factor` a finite number
 * >= 1, `jitter` `'full'` or `'none'`. Fields neither given nor defaulted keep `computeBackoffMs`'s own
 * defaults (base 1000 ms, max 60000 ms, factor 2, full jitter) and are checked as such.
 * @returns a new object with every field set.
 * @throws `InvalidOptionError` `<name>.<field> must be …` when a field is out of range, or
 *   `<name> must be an object` when `value` is neither an object nor `undefined`.
 */
export function checkBackoffOptions(
  name: string,
  value: unknown,
  defaults: BackoffOptions = {},
): Required<BackoffOptions> {
  if (value !== undefined && (typeof value !== 'object' || value === null || Array.isArray(value))) {
    throw new InvalidOptionError(`${name} must be an object of BackoffOptions, got ${show(value)}`);
  }
  const given = (value ?? {}) as BackoffOptions;
  const baseMs = checkFiniteNonNegative(`${name}.baseMs`, given.baseMs, defaults.baseMs ?? 1000);
  const maxMs = checkFiniteNonNegative(`${name}.maxMs`, given.maxMs, defaults.maxMs ?? 60_000);
  if (maxMs < baseMs) {
    throw new InvalidOptionError(`${name}.maxMs (${maxMs}) must be >= ${name}.baseMs (${baseMs})`);
  }
  const factor = checkFiniteNonNegative(`${name}.factor`, given.factor, defaults.factor ?? 2, 1);
  const jitter = checkOneOf(`${name}.jitter`, given.jitter, ['full', 'none'], defaults.jitter ?? 'full');
  return { baseMs, maxMs, factor, jitter };
}
