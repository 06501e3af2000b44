import { checkFingerprint, computeBackoffMs, fingerprint, InvalidPayloadError } from '../src';

describe('fingerprint', () => {
  it('is the SHA-256 hex of raw bytes; a string is taken as UTF-8', () => {
    expect(fingerprint('abc')).toBe('ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
    expect(fingerprint(Buffer.from('abc'))).toBe(fingerprint('abc'));
    expect(fingerprint(new Uint8Array([0x61, 0x62, 0x63]))).toBe(fingerprint('abc'));
  });

  it('canonicalizes JSON values (RFC 8785): key order and number spelling do not matter', () => {
    expect(fingerprint({ b: 1, a: [1, { d: 2, c: 1e3 }] })).toBe(
      fingerprint({ a: [1, { c: 1000, d: 2 }], b: 1 }),
    );
    expect(fingerprint({ a: 1 })).not.toBe(fingerprint({ a: '1' }));
    expect(fingerprint(null)).toBe(fingerprint('null'));
  });

  it.each<[string, unknown]>([
    ['undefined', undefined],
    ['a bigint', { amount: 10n }],
    [
      'a circular reference',
      (() => {
        const o: Record<string, unknown> = {};
        o.self = o;
        return o;
      })(),
    ],
    ['NaN', { amount: Number.NaN }],
    ['Infinity', [1, Number.POSITIVE_INFINITY]],
    ['a function', { f: () => 1 }],
    ['a symbol', { s: Symbol('x') }],
    [
      'a getter that throws',
      Object.defineProperty({}, 'x', {
        enumerable: true,
        get: () => {
          throw new Error('no');
        },
      }),
    ],
    [
      'a toJSON that throws',
      {
        toJSON: () => {
          throw new Error('no');
        },
      },
    ],
    // JSON turns these into {} whatever they hold: two different payloads would share one fingerprint,
    // and a PAYLOAD_MISMATCH would pass as a DUPLICATE.
    ['a Map', { m: new Map([['amount', 10]]) }],
    ['a Set', new Set([1, 2])],
    ['an ArrayBuffer (raw bytes: pass a Uint8Array over it)', new Uint8Array([1, 2]).buffer],
    ['a DataView', new DataView(new ArrayBuffer(2))],
    ['a WeakMap', [new WeakMap()]],
    ['a Promise', { p: Promise.resolve(1) }],
  ])('refuses %s with InvalidPayloadError (INVALID_PAYLOAD)', (_, payload) => {
    expect(() => fingerprint(payload as never)).toThrow(InvalidPayloadError);
    try {
      fingerprint(payload as never);
    } catch (error) {
      expect(error).toMatchObject({ code: 'INVALID_PAYLOAD', retryable: false });
    }
  });

  it('a shared (not circular) object and undefined properties are fine; Dates go through toJSON', () => {
    const shared = { a: 1 };
    expect(fingerprint({ x: shared, y: shared })).toBe(fingerprint({ x: { a: 1 }, y: { a: 1 } }));
    expect(fingerprint({ a: 1, b: undefined } as never)).toBe(fingerprint({ a: 1 }));
    expect(fingerprint({ at: new Date(0) } as never)).toBe(fingerprint({ at: '1970-01-01T00:00:00.000Z' }));
  });

  it('checkFingerprint: 64 hex characters, lowercased; anything else is INVALID_PAYLOAD', () => {
    expect(checkFingerprint('A'.repeat(64))).toBe('a'.repeat(64));
    for (const bad of ['', 'a'.repeat(63), 'g'.repeat(64), 'a'.repeat(100_000), 42]) {
      expect(() => checkFingerprint(bad)).toThrow(InvalidPayloadError);
    }
  });
});

describe('computeBackoffMs', () => {
  it('grows by factor from baseMs up to maxMs without jitter', () => {
    const o = { baseMs: 100, factor: 2, maxMs: 1000, jitter: 'none' } as const;
    expect([0, 1, 2, 3, 4, 5, 50].map((n) => computeBackoffMs(n, o))).toEqual([
      100, 100, 200, 400, 800, 1000, 1000,
    ]);
  });

  it('jitter spreads the delay within [delay/2, delay]', () => {
    expect(computeBackoffMs(3, { baseMs: 100 }, () => 0)).toBe(200);
    expect(computeBackoffMs(3, { baseMs: 100 }, () => 0.999999)).toBe(400);
    expect(computeBackoffMs(1, {}, () => 0.5)).toBe(750);
  });
});
