import { fingerprint, type JsonValue } from '@idempotent-consumer/core';
import { requestFingerprint } from '../src/request-fingerprint';
import { normalizeRequestTarget } from '../src/request-target';

/** The fingerprint as the core's generic canonical JSON makes it (what requestFingerprint wrote before). */
function generic(body: unknown, headers?: Record<string, string | undefined>, target?: string): string {
  const bodyFingerprint = requestFingerprint(body);
  const kind =
    body === undefined ? 'none' : typeof body === 'string' || body instanceof Uint8Array ? 'bytes' : 'json';
  const parts: Record<string, JsonValue> = { body: bodyFingerprint, bodyKind: kind };
  if (headers && Object.keys(headers).length > 0) {
    const chosen: Record<string, string | null> = {};
    for (const [name, value] of Object.entries(headers)) chosen[name.toLowerCase()] = value ?? null;
    parts.headers = chosen;
  }
  if (target !== undefined) parts.target = target;
  return fingerprint(parts);
}

describe('requestFingerprint writes the canonical JSON of its parts itself', () => {
  it.each<[string, unknown, Record<string, string | undefined> | undefined, string | undefined]>([
    ['a JSON body and a target', { amount: 1, currency: 'EUR' }, undefined, '/orders'],
    [
      'bytes, headers and a target',
      Buffer.from([0xff, 0x00]),
      { 'content-type': 'text/csv', 'X-B': 'b' },
      '/a?x=1',
    ],
    ['text, a missing header', 'amount=1', { 'x-tenant-hint': undefined, accept: 'a"b\\c' }, undefined],
    ['no body, unicode target', undefined, undefined, '/caf\u00e9/\u{1f600}?q=\u2028"'],
    ['a lone surrogate and control characters', null, { 'x-\u00e9': '\ud800\u0001' }, '/\u007f\ud83d'],
    [
      'header names that sort by UTF-16 code units',
      [1, 'a'],
      { b: '1', B2: '2', a: '3', '\u00e9': '4', Z: '5' },
      '/',
    ],
  ])('the same fingerprint as the core computes from the object: %s', (_what, body, headers, target) => {
    expect(requestFingerprint(body, headers, target)).toBe(generic(body, headers, target));
  });
});

describe('normalizeRequestTarget fast path', () => {
  it.each([
    '/orders',
    '/orders/7/items',
    '/a-b_c~d/e.f',
    '/v1/orders/8e03978e-40d5-43e8-bc93-6894a57f9324',
    '/.well-known/x',
    '/a/./b',
    '/a/../b',
    '/a/',
    '//a',
    '/a,b',
    '/%7Ea',
    '/a?x=1',
    '/',
  ])('%s normalises as the URL parser does', (target) => {
    const url = new URL(`http://target.invalid${target}`);
    let path = url.pathname
      .split('/')
      .map((s) => encodeURIComponent(decodeURIComponent(s)))
      .join('/');
    if (path.length > 1 && path.endsWith('/')) path = path.slice(0, -1);
    const params = [...url.searchParams].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    const expected = params.length > 0 ? `${path}?${new URLSearchParams(params).toString()}` : path;
    expect(normalizeRequestTarget(target)).toBe(expected);
  });
});
