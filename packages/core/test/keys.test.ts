import { buildRecordKey, InvalidKeyError } from '../src';

describe('buildRecordKey', () => {
  it('never maps two different (scope, key) pairs to one Redis key', () => {
    const pairs: [string, string][] = [
      ['a', 'b:c'],
      ['a:b', 'c'],
      ['a:1:b', 'c'],
      ['a', '1:b:c'],
      ['é', 'x'],
      ['e', '\u0301x'],
    ];
    const keys = pairs.map(([scope, key]) => buildRecordKey('idem', { scope, key }));
    expect(new Set(keys).size).toBe(pairs.length);
  });

  it.each([
    ['empty key', { scope: 's', key: '' }],
    ['non-string key', { scope: 's', key: 42 as unknown as string }],
    ['empty scope', { scope: '', key: 'k' }],
    ['oversized key', { scope: 's', key: 'x'.repeat(513) }],
  ])('rejects an %s with InvalidKeyError', (_, id) => {
    expect(() => buildRecordKey('idem', id)).toThrow(InvalidKeyError);
  });
});
