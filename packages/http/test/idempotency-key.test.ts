import { parseIdempotencyKey } from '../src/idempotency-key';

describe('parseIdempotencyKey', () => {
  it.each([
    [
      'a Structured Field string',
      '"8e03978e-40d5-43e8-bc93-6894a57f9324"',
      '8e03978e-40d5-43e8-bc93-6894a57f9324',
    ],
    ['a string with parameters (ignored)', '"abc";v=1', 'abc'],
    ['a string with surrounding spaces', '  "abc"  ', 'abc'],
    ['a token', 'abc/def:1', 'abc/def:1'],
    ['a bare UUID (not a token: starts with a digit)', '8e03978e-40d5-43e8', '8e03978e-40d5-43e8'],
    ['a bare number', '12345', '12345'],
    ['an escaped quote inside a string', '"a\\"b"', 'a"b'],
  ])('accepts %s', (_what, value, key) => {
    expect(parseIdempotencyKey(value, 255)).toEqual({ kind: 'key', key });
  });

  it.each([
    ['an empty value', '', 'empty'],
    ['only spaces', '   ', 'empty'],
    ['an empty string', '""', 'empty'],
    ['two comma-joined keys', '"a", "b"', 'malformed'],
    ['a list of two header lines', ['"a"', '"b"'], 'malformed'],
    ['an unterminated string', '"abc', 'malformed'],
    ['spaces inside a bare key', 'two words', 'malformed'],
    ['a semicolon in a bare key', 'a;b c', 'malformed'],
    ['a key over maxKeyBytes', `"${'k'.repeat(256)}"`, 'too-long'],
  ])('refuses %s', (_what, value, reason) => {
    expect(parseIdempotencyKey(value, 255)).toMatchObject({
      kind: 'invalid',
      reason,
      detail: expect.any(String),
    });
  });

  it('accepts a key of exactly maxKeyBytes, and reports a missing header', () => {
    expect(parseIdempotencyKey(`"${'k'.repeat(255)}"`, 255)).toMatchObject({ kind: 'key' });
    expect(parseIdempotencyKey(undefined, 255)).toEqual({ kind: 'missing' });
  });
});
