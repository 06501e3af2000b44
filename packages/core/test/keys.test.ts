import {
  buildRecordKey,
  buildScopeScanPattern,
  DEFAULT_MAX_KEY_BYTES,
  InvalidKeyError,
  parseRecordKey,
} from '../src';
import { RecordKeyBuilder } from '../src/keys';

describe('buildRecordKey', () => {
  it('never maps two different (scope, key) pairs to one Redis key', () => {
    const pairs: [string, string][] = [
      ['a', 'b:c'],
      ['a:b', 'c'],
      ['a:1:b', 'c'],
      ['a', '1:b:c'],
      ['é', 'x'],
      ['e', '\u0301x'],
      ['1', '1'],
      ['1', '1:1'],
      ['1:1', '1'],
      ['😀', 'x'],
      ['\uFFFD', 'x'],
    ];
    const keys = pairs.map(([scope, key]) => buildRecordKey('idem', { scope, key }));
    expect(new Set(keys).size).toBe(pairs.length);
  });

  it('has the documented shape <prefix>:<scope bytes>:<scope>:<key>', () => {
    expect(buildRecordKey('idem', { scope: 'payments', key: 'm-1' })).toBe('idem:8:payments:m-1');
    expect(buildRecordKey('idem', { scope: 'é', key: 'k' })).toBe('idem:2:é:k');
  });

  it('accepts a key of exactly the limit in UTF-8 bytes, and a custom limit', () => {
    expect(() => buildRecordKey('p', { scope: 's', key: 'x'.repeat(DEFAULT_MAX_KEY_BYTES) })).not.toThrow();
    expect(() => buildRecordKey('p', { scope: 's', key: 'é'.repeat(256) })).not.toThrow();
    expect(() => buildRecordKey('p', { scope: 's', key: 'é'.repeat(257) })).toThrow(InvalidKeyError);
    expect(() => buildRecordKey('p', { scope: 's', key: 'abcd' }, 3)).toThrow(/4 bytes long; at most 3/);
  });

  it.each([
    ['empty key', { scope: 's', key: '' }],
    ['non-string key', { scope: 's', key: 42 as unknown as string }],
    ['null key', { scope: 's', key: null as unknown as string }],
    ['empty scope', { scope: '', key: 'k' }],
    ['missing scope', { key: 'k' } as unknown as { scope: string; key: string }],
    ['oversized key', { scope: 's', key: 'x'.repeat(513) }],
    ['oversized scope', { scope: 'x'.repeat(513), key: 'k' }],
    // A lone surrogate goes to Redis as U+FFFD: '\uD800' and '\uFFFD' would share a record.
    ['lone high surrogate in the key', { scope: 's', key: 'a\uD800' }],
    ['lone low surrogate in the scope', { scope: '\uDC00b', key: 'k' }],
    ['reversed surrogate pair', { scope: 's', key: '\uDE00\uD83D' }],
  ])('rejects an %s with InvalidKeyError', (_, id) => {
    const call = () => buildRecordKey('idem', id);
    expect(call).toThrow(InvalidKeyError);
    expect(call).toThrow(expect.objectContaining({ code: 'INVALID_IDEMPOTENCY_KEY', retryable: false }));
  });

  it('rejects a bad prefix and a missing id', () => {
    expect(() => buildRecordKey('', { scope: 's', key: 'k' })).toThrow(InvalidKeyError);
    expect(() => buildRecordKey('idem', undefined as unknown as { scope: string; key: string })).toThrow(
      InvalidKeyError,
    );
  });
});

describe('RecordKeyBuilder (the store keeps the last scope key prefix)', () => {
  const ids: { scope: string; key: string }[] = [
    { scope: 'payments', key: 'm-1' },
    { scope: 'payments', key: 'é'.repeat(256) },
    { scope: 'payments', key: 'é'.repeat(257) }, // too long, after a scope that passed
    { scope: 'payments', key: 'a\uD800' },
    { scope: '\uDC00b', key: 'k' }, // a bad scope after a good one
    { scope: 'payments', key: 'm-2' },
    { scope: 'é', key: 'k' },
    { scope: '', key: 'k' },
    { scope: 'x'.repeat(513), key: 'k' },
    { scope: undefined as unknown as string, key: 'k' },
    { scope: 'é', key: '' },
    { scope: 'é', key: 'k2' },
  ];
  const outcome = (build: () => string) => {
    try {
      return build();
    } catch (error) {
      return `${(error as InvalidKeyError).code}: ${(error as Error).message}`;
    }
  };

  it('builds the same key, or throws the same InvalidKeyError, as buildRecordKey, call after call', () => {
    const builder = new RecordKeyBuilder('idem');
    for (const id of ids) {
      expect(outcome(() => builder.build(id))).toBe(outcome(() => buildRecordKey('idem', id)));
    }
    expect(outcome(() => builder.build(undefined as unknown as { scope: string; key: string }))).toBe(
      outcome(() => buildRecordKey('idem', undefined as unknown as { scope: string; key: string })),
    );
  });

  it('checks the prefix once, when it is made', () => {
    expect(() => new RecordKeyBuilder('')).toThrow(InvalidKeyError);
    expect(() => new RecordKeyBuilder('p\uD800')).toThrow(InvalidKeyError);
    expect(() => new RecordKeyBuilder('abcd', 3)).toThrow(/4 bytes long; at most 3/);
  });
});

describe('buildScopeScanPattern / parseRecordKey', () => {
  it('the pattern is the scope key prefix plus *, matching what buildRecordKey builds', () => {
    expect(buildScopeScanPattern('idem', 'orders')).toBe('idem:6:orders:*');
    const key = buildRecordKey('idem', { scope: 'orders', key: 'o:1' });
    expect(key.startsWith(buildScopeScanPattern('idem', 'orders').slice(0, -1))).toBe(true);
  });

  it('escapes the glob characters of the prefix and scope', () => {
    expect(buildScopeScanPattern('p*', 'a?[b]\\c')).toBe('p\\*:7:a\\?\\[b\\]\\\\c:*');
  });

  it('parses a record key of the scope back to its id, and refuses other scopes and prefixes', () => {
    const key = buildRecordKey('idem', { scope: 'orders', key: 'a:b:c' });
    expect(parseRecordKey('idem', 'orders', key)).toEqual({ scope: 'orders', key: 'a:b:c' });
    // 'orders:x' as scope has another length, so its keys never parse as scope 'orders'.
    expect(
      parseRecordKey('idem', 'orders', buildRecordKey('idem', { scope: 'orders:x', key: 'k' })),
    ).toBeUndefined();
    expect(
      parseRecordKey('idem', 'orders', buildRecordKey('other', { scope: 'orders', key: 'k' })),
    ).toBeUndefined();
    expect(parseRecordKey('idem', 'orders', 'idem:6:orders:')).toBeUndefined();
  });

  it('rejects a bad prefix or scope with InvalidKeyError', () => {
    expect(() => buildScopeScanPattern('', 'orders')).toThrow(InvalidKeyError);
    expect(() => buildScopeScanPattern('idem', '')).toThrow(InvalidKeyError);
    expect(() => parseRecordKey('idem', 'x'.repeat(513), 'k')).toThrow(InvalidKeyError);
  });
});
