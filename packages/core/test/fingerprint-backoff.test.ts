import { computeBackoffMs, fingerprint } from '../src';

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

  it('throws a TypeError for values without canonical JSON', () => {
    expect(() => fingerprint(undefined as unknown as null)).toThrow(TypeError);
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
