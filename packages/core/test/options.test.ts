import type { Redis } from 'ioredis';
import {
  Idempotency,
  type IdempotencyOptions,
  type IdempotencyStore,
  MemoryIdempotencyStore,
  NonRetryableError,
  RedisIdempotencyAdmin,
  RedisIdempotencyStore,
} from '../src';

const store = new MemoryIdempotencyStore();

describe('option validation', () => {
  it('applies documented defaults', () => {
    const { options } = new Idempotency({ store });
    expect(options).toMatchObject({
      leaseMs: 30_000,
      heartbeatIntervalMs: 10_000,
      retentionMs: 86_400_000,
      maxAttempts: 5,
      storeFailureMode: 'closed',
      writeAttempts: 8,
      maxResultBytes: 65_536,
      onResultTooLarge: 'omit',
      compressAboveBytes: 1024,
    });
    expect(new Idempotency({ store }, { leaseMs: 2 }).options.heartbeatIntervalMs).toBe(1);
  });

  it.each<[string, IdempotencyOptions]>([
    ['leaseMs 0', { leaseMs: 0 }],
    ['leaseMs 1.5', { leaseMs: 1.5 }],
    ['leaseMs NaN', { leaseMs: Number.NaN }],
    ['leaseMs as a string', { leaseMs: '100' as unknown as number }],
    ['leaseMs 2^52 + 1 (its end on the clock would not be an exact integer)', { leaseMs: 2 ** 52 + 1 }],
    ['heartbeatIntervalMs 0', { heartbeatIntervalMs: 0 }],
    ['heartbeatIntervalMs = leaseMs', { leaseMs: 100, heartbeatIntervalMs: 100 }],
    ['retentionMs 0', { retentionMs: 0 }],
    ['retentionMs Infinity', { retentionMs: Infinity }],
    ['maxAttempts 0', { maxAttempts: 0 }],
    ['writeAttempts 0', { writeAttempts: 0 }],
    ['maxResultBytes 0', { maxResultBytes: 0 }],
    ['compressAboveBytes -1', { compressAboveBytes: -1 }],
    ['storeFailureMode', { storeFailureMode: 'sometimes' as 'open' }],
    ['onResultTooLarge', { onResultTooLarge: 'truncate' as 'omit' }],
  ])('rejects %s with InvalidOptionError', (_, options) => {
    expect(() => new Idempotency({ store }, options)).toThrow(
      expect.objectContaining({ code: 'INVALID_OPTION', name: 'InvalidOptionError', retryable: false }),
    );
  });

  it('requires a store', () => {
    expect(() => new Idempotency({} as { store: IdempotencyStore })).toThrow(
      expect.objectContaining({ code: 'INVALID_OPTION' }),
    );
  });

  it.each([
    ['maxAttempts 0', { maxAttempts: 0 }],
    ['maxAttempts 1.5', { maxAttempts: 1.5 }],
    ['leaseMs -1', { leaseMs: -1 }],
    ['leaseMs 2^53 - 1', { leaseMs: Number.MAX_SAFE_INTEGER }],
    ['signal that is not an AbortSignal', { signal: { aborted: false } as unknown as AbortSignal }],
    ['signal null', { signal: null as unknown as AbortSignal }],
  ])('rejects a per-call override %s before claiming anything', async (_, overrides) => {
    const s = new MemoryIdempotencyStore();
    const idempotency = new Idempotency({ store: s });
    const handler = jest.fn();
    await expect(idempotency.run({ scope: 's', key: 'k' }, handler, overrides)).rejects.toMatchObject({
      code: 'INVALID_OPTION',
    });
    expect(handler).not.toHaveBeenCalled();
    expect(s.size).toBe(0);
  });

  it('resolves isRetryable to a predicate that never throws: one that throws counts as retryable', () => {
    const idempotency = new Idempotency(
      { store: new MemoryIdempotencyStore(), logger: false },
      {
        isRetryable: () => {
          throw new TypeError('a bug in the predicate');
        },
      },
    );
    // The adapters read this resolved predicate for their own decisions (unprotected runs).
    expect(idempotency.options.isRetryable(new Error('handler failed'))).toBe(true);
    const plain = new Idempotency({ store: new MemoryIdempotencyStore(), logger: false });
    expect(plain.options.isRetryable(new NonRetryableError('declined'))).toBe(false);
  });

  it('maxKeyBytes is an integer >= 1 in the memory store as in the Redis store and its admin (the memory store took any)', () => {
    const fake = { defineCommand: () => {} } as unknown as Redis;
    const makers = {
      MemoryIdempotencyStore: (maxKeyBytes: unknown) =>
        new MemoryIdempotencyStore({ maxKeyBytes: maxKeyBytes as number }),
      RedisIdempotencyStore: (maxKeyBytes: unknown) =>
        new RedisIdempotencyStore({ redis: fake }, { maxKeyBytes: maxKeyBytes as number }),
      RedisIdempotencyAdmin: (maxKeyBytes: unknown) =>
        new RedisIdempotencyAdmin({ redis: fake }, { maxKeyBytes: maxKeyBytes as number }),
    };
    for (const make of Object.values(makers)) {
      for (const [value, shown] of [
        [0, '0'],
        [-1, '-1'],
        [1.5, '1.5'],
        [Number.NaN, 'NaN'],
        [Number.POSITIVE_INFINITY, 'Infinity'],
        ['512', "'512'"],
      ] as const) {
        expect(() => make(value)).toThrow(
          expect.objectContaining({
            name: 'InvalidOptionError',
            code: 'INVALID_OPTION',
            message: `maxKeyBytes must be an integer >= 1, got ${shown}`,
          }),
        );
      }
      // 8: the Redis store also bounds its keyPrefix ('idem') by it.
      for (const value of [undefined, 8, 4096, Number.MAX_SAFE_INTEGER])
        expect(() => make(value)).not.toThrow();
    }
  });

  it('MemoryIdempotencyStore: maxKeyBytes bounds the scope and key, not its own record key prefix', async () => {
    // The bound applies to what the caller gives (the Redis store's keyPrefix is the caller's too); before,
    // maxKeyBytes 1 or 2 refused every claim, blaming a 3-byte "prefix" the caller never chose.
    const tiny = new MemoryIdempotencyStore({ maxKeyBytes: 2 });
    const options = { leaseMs: 1000, retentionMs: 1000 };
    await expect(tiny.claim({ scope: 'ab', key: 'cd' }, options)).resolves.toMatchObject({
      outcome: 'ACQUIRED',
    });
    await expect(tiny.claim({ scope: 'ab', key: 'cde' }, options)).rejects.toMatchObject({
      code: 'INVALID_IDEMPOTENCY_KEY',
      message: expect.stringContaining('The idempotency key is 3 bytes long; at most 2 are accepted'),
    });
  });

  it('RedisIdempotencyStore checks its options and its client', () => {
    const fake = { defineCommand: () => {} } as unknown as Redis;
    expect(() => new RedisIdempotencyStore({} as { redis: Redis })).toThrow(
      expect.objectContaining({ code: 'INVALID_OPTION' }),
    );
    for (const commandTimeoutMs of [0, 2 ** 31, Number.POSITIVE_INFINITY, Number.NaN]) {
      expect(() => new RedisIdempotencyStore({ redis: fake }, { commandTimeoutMs })).toThrow(
        expect.objectContaining({ code: 'INVALID_OPTION' }),
      );
    }
    expect(() => new RedisIdempotencyStore({ redis: fake }, { commandTimeoutMs: 2 ** 31 - 1 })).not.toThrow();
    for (const maxCommandsPerWrite of [0, 1.5, -1, Number.NaN, Number.POSITIVE_INFINITY]) {
      expect(() => new RedisIdempotencyStore({ redis: fake }, { maxCommandsPerWrite })).toThrow(
        expect.objectContaining({
          code: 'INVALID_OPTION',
          message: expect.stringContaining('maxCommandsPerWrite'),
        }),
      );
    }
    expect(() => new RedisIdempotencyStore({ redis: fake }, { maxCommandsPerWrite: 1 })).not.toThrow();
    expect(() => new RedisIdempotencyStore({ redis: fake }, { maxKeyBytes: 0 })).toThrow(
      expect.objectContaining({ code: 'INVALID_OPTION' }),
    );
    expect(() => new RedisIdempotencyStore({ redis: fake }, { keyPrefix: '' })).toThrow(
      expect.objectContaining({ code: 'INVALID_IDEMPOTENCY_KEY' }),
    );
  });
});
