import { UnexpectedReplyError } from '../src';
import {
  decodeClaimReply,
  decodeExtendReply,
  decodeMarkDeadLetteredReply,
  decodeStartReply,
  decodeState,
  decodeWriteReply,
} from '../src/store/decode-reply';

describe('decodeClaimReply', () => {
  it.each([
    [
      ['ACQUIRED', 1_700_000_000_000_000, 1, 1_700_000_030_000, 1_700_000_000_000, 1],
      {
        outcome: 'ACQUIRED',
        fencingToken: 1_700_000_000_000_000,
        attempt: 1,
        leaseExpiresAtMs: 1_700_000_030_000,
        serverTimeMs: 1_700_000_000_000,
        started: true,
      },
    ],
    [
      ['ACQUIRED_STALE', '2', '2', '5', '4', '0'],
      {
        outcome: 'ACQUIRED_STALE',
        fencingToken: 2,
        attempt: 2,
        leaseExpiresAtMs: 5,
        serverTimeMs: 4,
        started: false,
      },
    ],
    [
      ['DUPLICATE', 1, 1, 1, 'j1', 9],
      { outcome: 'DUPLICATE', fencingToken: 1, attempt: 1, result: 'j1', completedAtMs: 9 },
    ],
    [
      ['DUPLICATE', 1, 1, 1, Buffer.from('j2'), 9],
      { outcome: 'DUPLICATE', fencingToken: 1, attempt: 1, result: 'j2', completedAtMs: 9 },
    ],
    [
      ['DUPLICATE', 1, 1, 0, '', 9],
      { outcome: 'DUPLICATE', fencingToken: 1, attempt: 1, result: undefined, completedAtMs: 9 },
    ],
    [['CONFLICT', 3, 2, 250], { outcome: 'CONFLICT', fencingToken: 3, attempt: 2, remainingLeaseMs: 250 }],
    [
      ['PAYLOAD_MISMATCH', 1, 1, 'C'],
      { outcome: 'PAYLOAD_MISMATCH', fencingToken: 1, attempt: 1, state: 'COMPLETED' },
    ],
    [
      ['FAILED', 1, 5, 'ATTEMPTS_EXHAUSTED: 5 of 5 attempts used', 1],
      {
        outcome: 'FAILED',
        fencingToken: 1,
        attempt: 5,
        error: 'ATTEMPTS_EXHAUSTED: 5 of 5 attempts used',
        deadLettered: true,
      },
    ],
  ])('decodes %j', (raw, decoded) => {
    expect(decodeClaimReply(raw)).toEqual(decoded);
  });

  it.each([
    ['not an array', 'ACQUIRED'],
    ['null', null],
    ['empty array', []],
    ['unknown outcome', ['MAYBE', 1, 1, 1, 1]],
    ['lower-case outcome', ['acquired', 1, 1, 1, 1]],
    ['too short', ['ACQUIRED', 1, 1, 1, 1]],
    ['too long', ['ACQUIRED', 1, 1, 1, 1, 1, 1]],
    ['started 2', ['ACQUIRED', 1, 1, 1, 1, 2]],
    ['FAILED without deadLettered', ['FAILED', 1, 1, 'x']],
    ['non-integer token', ['ACQUIRED', 1.5, 1, 1, 1]],
    ['string token with junk', ['ACQUIRED', '1x', 1, 1, 1]],
    ['null token', ['CONFLICT', null, 1, 1]],
    ['unsafe integer', ['CONFLICT', 2 ** 60, 1, 1]],
    ['hasResult 2', ['DUPLICATE', 1, 1, 2, 'j1', 1]],
    ['result not a string', ['DUPLICATE', 1, 1, 1, 42, 1]],
    ['unknown state letter', ['PAYLOAD_MISMATCH', 1, 1, 'X']],
    ['error not a string', ['FAILED', 1, 1, 7, 0]],
    ['a write reply', ['OK', 1]],
  ])('rejects %s with UnexpectedReplyError', (_, raw) => {
    expect(() => decodeClaimReply(raw)).toThrow(UnexpectedReplyError);
  });
});

describe('decodeWriteReply / decodeExtendReply / decodeState', () => {
  it('decodes OK and LEASE_LOST', () => {
    expect(decodeWriteReply('complete', ['OK', 7])).toEqual({ ok: true, serverTimeMs: 7 });
    expect(decodeWriteReply('release', ['LEASE_LOST', 2, 'P'])).toEqual({
      ok: false,
      reason: 'LEASE_LOST',
      currentFencingToken: 2,
      state: 'IN_PROGRESS',
    });
    expect(decodeWriteReply('fail', ['LEASE_LOST', 0, ''])).toMatchObject({
      state: null,
      currentFencingToken: 0,
    });
    expect(decodeExtendReply(['OK', 10, 5])).toEqual({ ok: true, leaseExpiresAtMs: 10, serverTimeMs: 5 });
    expect(decodeExtendReply(['LEASE_LOST', 1, 'C'])).toMatchObject({ ok: false, state: 'COMPLETED' });
    expect(decodeStartReply(['OK', 3, 10, 5])).toEqual({
      ok: true,
      attempt: 3,
      leaseExpiresAtMs: 10,
      serverTimeMs: 5,
    });
    expect(decodeStartReply(['LEASE_LOST', 9, 'P'])).toMatchObject({ ok: false, currentFencingToken: 9 });
    expect(decodeMarkDeadLetteredReply(['OK', 1])).toEqual({ ok: true, first: true });
    expect(decodeMarkDeadLetteredReply(['OK', 0])).toEqual({ ok: true, first: false });
    expect(decodeMarkDeadLetteredReply(['LEASE_LOST', 1, 'F'])).toMatchObject({ state: 'FAILED' });
  });

  it.each([
    ['OK without time', () => decodeWriteReply('complete', ['OK'])],
    ['LEASE_LOST bad state', () => decodeWriteReply('complete', ['LEASE_LOST', 1, 'Z'])],
    ['LEASE_LOST too short', () => decodeWriteReply('fail', ['LEASE_LOST', 1])],
    ['unknown head', () => decodeWriteReply('release', ['NOPE', 1])],
    ['extend OK too short', () => decodeExtendReply(['OK', 1])],
    ['extend string', () => decodeExtendReply('OK')],
    ['state number', () => decodeState(1)],
    ['start OK too short', () => decodeStartReply(['OK', 1, 2])],
    ['mark OK with 2', () => decodeMarkDeadLetteredReply(['OK', 2])],
  ])('rejects %s', (_, call) => {
    expect(call).toThrow(UnexpectedReplyError);
  });
});
