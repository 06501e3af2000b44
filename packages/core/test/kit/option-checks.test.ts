import { InvalidOptionError } from '../../src';
import {
  checkAtMost,
  checkBackoffOptions,
  checkFiniteNonNegative,
  checkFunction,
  checkNonEmptyString,
  checkNonNegativeInteger,
  checkOneOf,
  checkPositiveInteger,
} from '../../src/kit/option-checks';
import { checkStopTimeoutMs, DEFAULT_STOP_TIMEOUT_MS } from '../../src/kit/stop-timeout';

/** Runs `fn`, expecting an InvalidOptionError; returns its message. */
function messageOf(fn: () => unknown): string {
  try {
    fn();
  } catch (error) {
    expect(error).toBeInstanceOf(InvalidOptionError);
    expect((error as InvalidOptionError).code).toBe('INVALID_OPTION');
    return (error as Error).message;
  }
  throw new Error('expected an InvalidOptionError');
}

describe('kit: option checks', () => {
  it('checkAtMost passes a value up to the bound and names the option above it', () => {
    expect(checkAtMost('waitTimeSeconds', 20, 20)).toBe(20);
    expect(messageOf(() => checkAtMost('waitTimeSeconds', 21, 20))).toBe(
      'waitTimeSeconds must be at most 20, got 21',
    );
  });

  it('checkStopTimeoutMs: every adapter’s stopTimeoutMs, 0 to 2^31-1, 30000 by default', () => {
    expect(DEFAULT_STOP_TIMEOUT_MS).toBe(30_000);
    expect(checkStopTimeoutMs(undefined)).toBe(30_000);
    expect(checkStopTimeoutMs(0)).toBe(0);
    expect(checkStopTimeoutMs(2 ** 31 - 1)).toBe(2 ** 31 - 1);
    expect(messageOf(() => checkStopTimeoutMs(2 ** 31))).toBe(
      'stopTimeoutMs must be at most 2147483647, got 2147483648',
    );
    expect(messageOf(() => checkStopTimeoutMs(-1))).toBe('stopTimeoutMs must be an integer >= 0, got -1');
  });

  it.each([1, 2, 30_000, Number.MAX_SAFE_INTEGER])('checkPositiveInteger accepts %p', (v) => {
    expect(checkPositiveInteger('prefetch', v)).toBe(v);
  });

  it.each([0, -1, 1.5, Number.NaN, Number.POSITIVE_INFINITY, 2 ** 53, '5', null, undefined])(
    'checkPositiveInteger rejects %p with the option name',
    (v) => {
      expect(messageOf(() => checkPositiveInteger('prefetch', v))).toMatch(
        /^prefetch must be an integer >= 1, got /,
      );
    },
  );

  it('a fallback stands in for undefined only', () => {
    expect(checkPositiveInteger('prefetch', undefined, 10)).toBe(10);
    expect(checkPositiveInteger('prefetch', 3, 10)).toBe(3);
    expect(messageOf(() => checkPositiveInteger('prefetch', 0, 10))).toBe(
      'prefetch must be an integer >= 1, got 0',
    );
  });

  it('checkNonNegativeInteger accepts 0 and rejects fractions and negatives', () => {
    expect(checkNonNegativeInteger('conflictWaitMs', 0)).toBe(0);
    expect(checkNonNegativeInteger('conflictWaitMs', undefined, 5000)).toBe(5000);
    expect(messageOf(() => checkNonNegativeInteger('conflictWaitMs', -1))).toBe(
      'conflictWaitMs must be an integer >= 0, got -1',
    );
    expect(messageOf(() => checkNonNegativeInteger('conflictWaitMs', 0.5))).toMatch(/^conflictWaitMs/);
  });

  it('checkFiniteNonNegative accepts fractions and rejects Infinity, NaN, negatives and values below min', () => {
    expect(checkFiniteNonNegative('ratio', 0.25)).toBe(0.25);
    expect(checkFiniteNonNegative('ratio', undefined, 1.5)).toBe(1.5);
    expect(messageOf(() => checkFiniteNonNegative('ratio', Number.POSITIVE_INFINITY))).toBe(
      'ratio must be a finite number >= 0, got Infinity',
    );
    expect(messageOf(() => checkFiniteNonNegative('ratio', Number.NaN))).toMatch(/^ratio must be a finite/);
    expect(messageOf(() => checkFiniteNonNegative('ratio', -0.1))).toMatch(/^ratio must be a finite/);
    expect(messageOf(() => checkFiniteNonNegative('factor', 0.5, undefined, 1))).toBe(
      'factor must be a finite number >= 1, got 0.5',
    );
  });

  it('checkOneOf lists the choices and quotes strings', () => {
    expect(checkOneOf('missingKey', 'process', ['dead-letter', 'process'])).toBe('process');
    expect(checkOneOf('missingKey', undefined, ['dead-letter', 'process'], 'dead-letter')).toBe(
      'dead-letter',
    );
    expect(messageOf(() => checkOneOf('missingKey', 'reject', ['dead-letter', 'process']))).toBe(
      "missingKey must be 'dead-letter' or 'process', got 'reject'",
    );
    expect(messageOf(() => checkOneOf('mode', 4, ['a', 'b', 'c']))).toBe(
      "mode must be 'a', 'b' or 'c', got 4",
    );
  });

  it('checkNonEmptyString checks emptiness and the UTF-8 byte length', () => {
    expect(checkNonEmptyString('queue', 'orders')).toBe('orders');
    expect(checkNonEmptyString('scope', undefined, 'orders')).toBe('orders');
    expect(messageOf(() => checkNonEmptyString('queue', ''))).toBe(
      "queue must be a non-empty string, got ''",
    );
    expect(messageOf(() => checkNonEmptyString('queue', 5))).toBe('queue must be a non-empty string, got 5');
    expect(checkNonEmptyString('queue', 'é'.repeat(127), undefined, 255)).toHaveLength(127);
    expect(messageOf(() => checkNonEmptyString('queue', 'é'.repeat(128), undefined, 255))).toMatch(
      /^queue must be a non-empty string of at most 255 bytes/,
    );
  });

  it('checkFunction', () => {
    const f = (m: string) => m;
    expect(checkFunction('idempotencyKey', f)).toBe(f);
    expect(checkFunction('idempotencyKey', undefined, f)).toBe(f);
    expect(messageOf(() => checkFunction('idempotencyKey', 'messageId'))).toBe(
      'idempotencyKey must be a function, got string',
    );
    expect(messageOf(() => checkFunction('idempotencyKey', null))).toBe(
      'idempotencyKey must be a function, got null',
    );
  });

  it('checkBackoffOptions merges over the defaults and checks every field', () => {
    expect(checkBackoffOptions('retryBackoff', undefined)).toEqual({
      baseMs: 1000,
      maxMs: 60_000,
      factor: 2,
      jitter: 'full',
    });
    expect(checkBackoffOptions('retryBackoff', { baseMs: 10 }, { baseMs: 250, maxMs: 5000 })).toEqual({
      baseMs: 10,
      maxMs: 5000,
      factor: 2,
      jitter: 'full',
    });
    expect(messageOf(() => checkBackoffOptions('retryBackoff', 5))).toMatch(
      /^retryBackoff must be an object/,
    );
    expect(messageOf(() => checkBackoffOptions('retryBackoff', null))).toMatch(
      /^retryBackoff must be an object/,
    );
    expect(messageOf(() => checkBackoffOptions('retryBackoff', { baseMs: -1 }))).toMatch(
      /^retryBackoff\.baseMs/,
    );
    expect(messageOf(() => checkBackoffOptions('retryBackoff', { baseMs: 10, maxMs: 5 }))).toBe(
      'retryBackoff.maxMs (5) must be >= retryBackoff.baseMs (10)',
    );
    expect(messageOf(() => checkBackoffOptions('storeProbeBackoff', { factor: 0.5 }))).toMatch(
      /^storeProbeBackoff\.factor must be a finite number >= 1/,
    );
    expect(messageOf(() => checkBackoffOptions('retryBackoff', { jitter: 'half' }))).toBe(
      "retryBackoff.jitter must be 'full' or 'none', got 'half'",
    );
  });
});
