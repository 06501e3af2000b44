import * as core from '../src';
import {
  HandlerTimeoutError,
  IdempotencyConflictError,
  IdempotencyError,
  InvalidKeyError,
  InvalidOptionError,
  InvalidPayloadError,
  isIdempotencyError,
  LeaseLostError,
  MissingKeyError,
  NonRetryableError,
  PayloadMismatchError,
  RecordFailedError,
  ReplicationTimeoutError,
  ResultTooLargeError,
  StoreUnavailableError,
  TopologyMismatchError,
  UnexpectedReplyError,
  UnreadableResultError,
} from '../src';

describe('errors', () => {
  it.each([
    [InvalidKeyError, 'INVALID_IDEMPOTENCY_KEY', false],
    [MissingKeyError, 'MISSING_IDEMPOTENCY_KEY', false],
    [InvalidOptionError, 'INVALID_OPTION', false],
    [InvalidPayloadError, 'INVALID_PAYLOAD', false],
    [StoreUnavailableError, 'STORE_UNAVAILABLE', true],
    [UnexpectedReplyError, 'UNEXPECTED_STORE_REPLY', false],
    [UnreadableResultError, 'UNREADABLE_RESULT', false],
    [LeaseLostError, 'LEASE_LOST', true],
    [HandlerTimeoutError, 'HANDLER_TIMEOUT', true],
    [ResultTooLargeError, 'RESULT_TOO_LARGE', false],
    [NonRetryableError, 'NON_RETRYABLE', false],
    [TopologyMismatchError, 'TOPOLOGY_MISMATCH', false],
    [IdempotencyConflictError, 'IDEMPOTENCY_CONFLICT', true],
    [PayloadMismatchError, 'PAYLOAD_MISMATCH', false],
    [RecordFailedError, 'RECORD_FAILED', false],
    [ReplicationTimeoutError, 'REPLICATION_TIMEOUT', true],
  ] as const)(
    '%p has code %s, retryable %s, a literal name, and keeps its cause',
    (Class, code, retryable) => {
      const cause = new Error('underlying');
      const error = new Class('message', { cause });
      expect(error).toBeInstanceOf(IdempotencyError);
      expect(error).toBeInstanceOf(Error);
      expect(error.code).toBe(code);
      expect(error.retryable).toBe(retryable);
      expect(error.name).toBe(Class.name);
      expect(error.message).toBe('message');
      expect(error.cause).toBe(cause);
      expect(Object.hasOwn(new Class('no cause'), 'cause')).toBe(false);
      expect(String(error)).toBe(`${Class.name}: message`);
      expect(isIdempotencyError(error)).toBe(true);
    },
  );

  it('codes are SCREAMING_SNAKE and unique', () => {
    type ErrorClass = new (message: string) => IdempotencyError;
    const classes = Object.values(core).filter(
      (v) => typeof v === 'function' && (v as { prototype?: unknown }).prototype instanceof IdempotencyError,
    ) as unknown as ErrorClass[];
    const codes = classes.map((C) => new C('x').code);
    expect(codes.length).toBeGreaterThanOrEqual(9);
    expect(new Set(codes).size).toBe(codes.length);
    for (const code of codes) expect(code).toMatch(/^[A-Z]+(_[A-Z]+)*$/);
  });

  it('isIdempotencyError recognises errors from another copy of the package, where instanceof fails', () => {
    let other: typeof core | undefined;
    jest.isolateModules(() => {
      other = jest.requireActual<typeof core>('../src');
    });
    expect(other).toBeDefined();
    expect(other!.StoreUnavailableError).not.toBe(StoreUnavailableError);
    const foreign = new other!.StoreUnavailableError('from the other copy');
    expect(foreign instanceof StoreUnavailableError).toBe(false);
    expect(isIdempotencyError(foreign)).toBe(true);
    expect(other!.isIdempotencyError(new LeaseLostError('from this copy'))).toBe(true);
    // The default retry policy reads the brand too, so a foreign NonRetryableError is not retried.
    expect(core.defaultIsRetryable(new other!.NonRetryableError('x'))).toBe(false);
    expect(core.defaultIsRetryable(new other!.StoreUnavailableError('x'))).toBe(true);
  });

  it.each([
    [null],
    [undefined],
    ['STORE_UNAVAILABLE'],
    [new Error('plain')],
    [{ code: 'LEASE_LOST', retryable: true }],
  ])('isIdempotencyError(%p) is false', (value) => {
    expect(isIdempotencyError(value)).toBe(false);
  });

  it('defaultIsRetryable: plain errors are retryable unless they say retryable: false', () => {
    expect(core.defaultIsRetryable(new Error('x'))).toBe(true);
    expect(core.defaultIsRetryable(Object.assign(new Error('x'), { retryable: false }))).toBe(false);
    expect(core.defaultIsRetryable('a string')).toBe(true);
    expect(core.defaultIsRetryable(null)).toBe(true);
  });

  it('describeError: Name [code]: message, capped at 1000 characters', () => {
    expect(core.describeError(new NonRetryableError('declined'))).toBe(
      'NonRetryableError [NON_RETRYABLE]: declined',
    );
    expect(core.describeError('plain')).toBe('plain');
    expect(core.describeError(new Error('y'.repeat(5000)))).toHaveLength(1000);
  });
});
