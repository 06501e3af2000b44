import type * as core from '../src';
import {
  Idempotency,
  isIdempotencyError,
  MemoryIdempotencyStore,
  makeIdempotent,
  UnexpectedReplyError,
  UnreadableResultError,
} from '../src';
import { unreadableDuplicateOf } from '../src/kit/unreadable-duplicate';

const id = { scope: 'payments', key: 'p-1' };

/** A key COMPLETED with `stored` as its encoded result, written through the store as `complete` would. */
async function completedWith(stored: string, conflictWaitMs = 0) {
  const store = new MemoryIdempotencyStore();
  const idempotency = new Idempotency({ store, logger: false }, { leaseMs: 30_000, conflictWaitMs });
  const claim = await idempotency.claim(id);
  if (claim.outcome !== 'ACQUIRED') throw new Error(`claimed ${claim.outcome}`);
  const write = () => store.complete(id, claim.fencingToken, { retentionMs: 60_000, result: stored });
  return { store, idempotency, claim, write };
}

describe('a DUPLICATE whose stored result cannot be decoded', () => {
  it.each([
    ['an unknown encoding (a newer version)', 'x{"v":2}'],
    ['corrupt JSON', 'j{not json'],
    ['corrupt deflate', 'z!!!not-deflate'],
  ])(
    '%s: run rejects UnreadableResultError with the duplicate’s facts; the handler does not run',
    async (_, stored) => {
      const t = await completedWith(stored);
      await t.write();
      const handler = jest.fn();
      const error = await t.idempotency.run(id, handler).catch((e: unknown) => e);
      expect(handler).not.toHaveBeenCalled();
      expect(error).toBeInstanceOf(UnreadableResultError);
      // Existing checks keep matching it.
      expect(error).toBeInstanceOf(UnexpectedReplyError);
      const unreadable = error as UnreadableResultError;
      expect(unreadable).toMatchObject({
        name: 'UnreadableResultError',
        code: 'UNREADABLE_RESULT',
        retryable: false,
      });
      expect(unreadable.cause).toBeInstanceOf(UnexpectedReplyError);
      expect(isIdempotencyError(unreadable)).toBe(true);
      const record = await t.store.get(id);
      expect(record?.state).toBe('COMPLETED');
      expect(unreadable.duplicate).toEqual({
        fencingToken: t.claim.fencingToken,
        attempt: 1,
        completedAtMs: expect.any(Number),
      });
      expect(unreadable.duplicate.completedAtMs).toBeGreaterThan(0);
      // The kit turns it into the DUPLICATE a consumer settles.
      expect(unreadableDuplicateOf(error)).toEqual({
        outcome: 'DUPLICATE',
        result: undefined,
        hasResult: false,
        ...unreadable.duplicate,
      });
    },
  );

  it('claimMany + settle: settle throws UnreadableResultError for that reply only', async () => {
    const t = await completedWith('x{"v":2}');
    await t.write();
    const [unreadable, fresh] = await t.idempotency.claimMany([id, { scope: 'payments', key: 'p-2' }]);
    expect(unreadable?.outcome).toBe('DUPLICATE');
    expect(fresh?.outcome).toBe('ACQUIRED');
    expect(() => t.idempotency.settle(unreadable!)).toThrow(UnreadableResultError);
  });

  it('run’s conflict wait ending in such a DUPLICATE rejects UnreadableResultError too', async () => {
    const t = await completedWith('x{"v":2}', 10_000);
    const outcomes: string[] = [];
    const conflicted = new Promise<void>((resolve) =>
      t.idempotency.on('outcome', (e) => {
        outcomes.push(e.outcome);
        if (e.outcome === 'CONFLICT') resolve();
      }),
    );
    const handler = jest.fn();
    const waiting = t.idempotency.run(id, handler).catch((e: unknown) => e);
    await conflicted;
    await t.write();
    const error = await waiting;
    expect(error).toBeInstanceOf(UnreadableResultError);
    expect(outcomes).toEqual(['CONFLICT', 'DUPLICATE']);
    expect(handler).not.toHaveBeenCalled();
  });

  it('a makeIdempotent function rejects with it (it has no result to return) and does not run', async () => {
    const t = await completedWith('x{"v":2}');
    await t.write();
    const fn = jest.fn(async (_order: { id: string }) => 'charged');
    const idempotent = makeIdempotent(fn, {
      idempotency: t.idempotency,
      scope: 'payments',
      key: () => 'p-1',
    });
    await expect(idempotent({ id: 'p-1' })).rejects.toBeInstanceOf(UnreadableResultError);
    expect(fn).not.toHaveBeenCalled();
  });

  it('unreadableDuplicateOf: undefined for any other error, a DUPLICATE for another copy’s error', () => {
    expect(
      unreadableDuplicateOf(new UnexpectedReplyError('a reply this version cannot read')),
    ).toBeUndefined();
    expect(unreadableDuplicateOf(new Error('plain'))).toBeUndefined();
    expect(unreadableDuplicateOf({ code: 'UNREADABLE_RESULT' })).toBeUndefined();
    expect(unreadableDuplicateOf(undefined)).toBeUndefined();
    let other: typeof core | undefined;
    jest.isolateModules(() => {
      other = jest.requireActual<typeof core>('../src');
    });
    const foreign = new other!.UnreadableResultError('from the other copy', {
      duplicate: { fencingToken: 7, attempt: 2, completedAtMs: 1_700_000_000_000 },
    });
    expect(foreign instanceof UnreadableResultError).toBe(false);
    expect(unreadableDuplicateOf(foreign)).toEqual({
      outcome: 'DUPLICATE',
      result: undefined,
      hasResult: false,
      fencingToken: 7,
      attempt: 2,
      completedAtMs: 1_700_000_000_000,
    });
  });
});
