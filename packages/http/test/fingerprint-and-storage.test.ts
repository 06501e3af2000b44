import { fingerprint, InvalidOptionError } from '@idempotent-consumer/core';
import { resolveHttpOptions } from '../src/options';
import { problemAnswer, retryAfterSeconds } from '../src/problem';
import { requestFingerprint } from '../src/request-fingerprint';
import { replayAnswer, storeResponse } from '../src/stored-response';

describe('requestFingerprint', () => {
  it('hashes parsed JSON canonically: key order does not matter, values do', () => {
    const a = requestFingerprint({ amount: 1, currency: 'EUR', nested: { x: 1, y: [1, 2] } });
    expect(requestFingerprint({ nested: { y: [1, 2], x: 1 }, currency: 'EUR', amount: 1 })).toBe(a);
    expect(requestFingerprint({ amount: 2, currency: 'EUR', nested: { x: 1, y: [1, 2] } })).not.toBe(a);
    expect(a).toBe(fingerprint({ amount: 1, currency: 'EUR', nested: { x: 1, y: [1, 2] } }));
  });

  it('hashes raw bytes and text as bytes, and no body as zero bytes', () => {
    expect(requestFingerprint(Buffer.from('a=1&b=2'))).toBe(requestFingerprint('a=1&b=2'));
    expect(requestFingerprint(Buffer.from('a=1&b=2'))).not.toBe(requestFingerprint('b=2&a=1'));
    expect(requestFingerprint(undefined)).toBe(fingerprint(Buffer.alloc(0)));
  });

  it('includes chosen headers when given', () => {
    const body = { a: 1 };
    const json = requestFingerprint(body, { 'content-type': 'application/json' });
    expect(json).not.toBe(requestFingerprint(body));
    expect(requestFingerprint(body, { 'Content-Type': 'application/json' })).toBe(json);
    expect(requestFingerprint(body, { 'content-type': 'text/plain' })).not.toBe(json);
    expect(requestFingerprint(body, { 'content-type': undefined })).not.toBe(json);
  });

  it('includes the request target (path and query) when given', () => {
    const body = { amount: 100 };
    const a = requestFingerprint(body, undefined, '/accounts/A/payouts?dryRun=true');
    expect(requestFingerprint({ amount: 100 }, {}, '/accounts/A/payouts?dryRun=true')).toBe(a);
    expect(requestFingerprint(body, undefined, '/accounts/A/payouts')).not.toBe(a);
    expect(requestFingerprint(body, undefined, '/accounts/B/payouts?dryRun=true')).not.toBe(a);
    expect(requestFingerprint(body)).not.toBe(a);
    const withHeader = requestFingerprint(body, { 'content-type': 'application/json' }, '/x');
    expect(withHeader).not.toBe(requestFingerprint(body, { 'content-type': 'application/json' }));
  });

  it('with a target, a text body and a JSON value of the same bytes are two payloads (a JSON string "1" and the number 1)', () => {
    expect(requestFingerprint('1', undefined, '/x')).not.toBe(requestFingerprint(1, undefined, '/x'));
    expect(requestFingerprint('{"a":1}', undefined, '/x')).not.toBe(
      requestFingerprint({ a: 1 }, undefined, '/x'),
    );
    expect(requestFingerprint(Buffer.from('1'), undefined, '/x')).toBe(
      requestFingerprint('1', undefined, '/x'),
    );
    expect(requestFingerprint(undefined, undefined, '/x')).not.toBe(requestFingerprint('', undefined, '/x'));
  });
});

describe('stored responses', () => {
  const allow = new Set(['content-type', 'location']);

  it('keeps the allow-listed headers only and replays identical bytes with the replay marker', () => {
    const body = Buffer.from('{"id":1}');
    const stored = storeResponse(
      201,
      {
        'Content-Type': 'application/json',
        Location: '/orders/1',
        'set-cookie': ['s=1'],
        'content-length': 8,
      },
      body,
      allow,
    );
    expect(stored).toEqual({
      v: 1,
      status: 201,
      headers: { 'content-type': 'application/json', location: '/orders/1' },
      body: '{"id":1}',
      encoding: 'utf8',
    });
    const replay = replayAnswer(JSON.parse(JSON.stringify(stored)), 'Idempotent-Replayed');
    expect(replay).toEqual({
      status: 201,
      headers: { 'content-type': 'application/json', location: '/orders/1', 'idempotent-replayed': 'true' },
      body,
    });
  });

  it('stores bytes that are not UTF-8 as base64, round trip exact', () => {
    const body = Buffer.from([0xff, 0xfe, 0x00, 0x80, 0x41]);
    const stored = storeResponse(200, {}, body, allow);
    expect(stored.encoding).toBe('base64');
    expect(replayAnswer(stored, 'x-replayed')?.body.equals(body)).toBe(true);
  });

  it('does not replay a value that is not a stored response', () => {
    for (const value of [undefined, null, 'text', { v: 2 }, { v: 1, status: 200 }]) {
      expect(replayAnswer(value, 'Idempotent-Replayed')).toBeUndefined();
    }
  });
});

describe('problem answers and options', () => {
  it('builds RFC 9457 problem details with type, title, status, detail and Retry-After in whole seconds', () => {
    const answer = problemAnswer('https://errors.example/', 'request-in-progress', 'busy', 1_200);
    expect(answer.status).toBe(409);
    expect(answer.headers).toEqual({ 'content-type': 'application/problem+json', 'retry-after': '2' });
    expect(JSON.parse(answer.body.toString())).toEqual({
      type: 'https://errors.example/request-in-progress',
      title: 'A request with this Idempotency-Key is in progress',
      status: 409,
      detail: 'busy',
    });
    expect([retryAfterSeconds(0), retryAfterSeconds(1000), retryAfterSeconds(1001)]).toEqual([1, 1, 2]);
  });

  it('applies defaults and refuses out-of-range options', () => {
    const o = resolveHttpOptions();
    expect([...o.methods]).toEqual(['POST', 'PATCH']);
    expect(o).toMatchObject({
      required: false,
      maxKeyBytes: 255,
      maxResponseBytes: 65_536,
      onResponseTooLarge: 'fail',
    });
    expect(o.runOptions.conflictWaitMs).toBe(5000);
    expect(resolveHttpOptions({ routes: ['/a'] }).routes('/b', 'POST')).toBe(false);
    expect(() => resolveHttpOptions({ maxKeyBytes: 0 })).toThrow(InvalidOptionError);
    expect(() => resolveHttpOptions({ conflictWaitMs: -1 })).toThrow(InvalidOptionError);
    expect(() => resolveHttpOptions({ onResponseTooLarge: 'truncate' as never })).toThrow(InvalidOptionError);
  });
});
