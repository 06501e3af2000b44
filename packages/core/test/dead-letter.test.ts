import { Idempotency, type IdempotencyOptions, MemoryIdempotencyStore, NonRetryableError } from '../src';
import { deadLetterOf, deadLetterReasonOf, unprotectedDeadLetter } from '../src/dead-letter';
import { DEAD_LETTER_FIELDS, NO_CLAIM_OUTCOME } from '../src/kit';

function setup(options: IdempotencyOptions = {}) {
  const store = new MemoryIdempotencyStore();
  return new Idempotency({ store }, { leaseMs: 10_000, ...options });
}

const fail = () => {
  throw new Error('boom');
};

describe('deadLetterReasonOf', () => {
  it('attempts-exhausted: a retryable error on the last allowed attempt', async () => {
    const idempotency = setup({ maxAttempts: 1 });
    const result = await idempotency.run({ scope: 's', key: 'k' }, fail);
    expect(result).toMatchObject({ status: 'failed', reason: 'attempts-exhausted' });
    expect(deadLetterReasonOf(result)).toBe('attempts-exhausted');
  });

  it('non-retryable: the handler threw a NonRetryableError', async () => {
    const result = await setup().run({ scope: 's', key: 'k' }, () => {
      throw new NonRetryableError('bad input');
    });
    expect(deadLetterReasonOf(result)).toBe('non-retryable');
  });

  it("result-too-large: a result above the cap with onResultTooLarge 'fail'", async () => {
    const idempotency = setup({ maxResultBytes: 10, compressAboveBytes: Infinity, onResultTooLarge: 'fail' });
    const result = await idempotency.run({ scope: 's', key: 'k' }, () => 'x'.repeat(100));
    expect(deadLetterReasonOf(result)).toBe('result-too-large');
  });

  it('failed-record: a later delivery of a FAILED key (run result and claim reply)', async () => {
    const idempotency = setup({ maxAttempts: 1 });
    await idempotency.run({ scope: 's', key: 'k' }, fail);
    const again = await idempotency.run({ scope: 's', key: 'k' }, () => 'never');
    expect(again.outcome).toBe('FAILED');
    expect(deadLetterReasonOf(again)).toBe('failed-record');
    const reply = await idempotency.claim({ scope: 's', key: 'k' });
    expect(deadLetterReasonOf(reply)).toBe('failed-record');
  });

  it('payload-mismatch: the key was first used with another payload (run result and claim reply)', async () => {
    const idempotency = setup();
    await idempotency.run({ scope: 's', key: 'k', payload: { a: 1 } }, () => 'ok');
    const other = await idempotency.run({ scope: 's', key: 'k', payload: { a: 2 } }, () => 'never');
    expect(other.outcome).toBe('PAYLOAD_MISMATCH');
    expect(deadLetterReasonOf(other)).toBe('payload-mismatch');
    const reply = await idempotency.claim({ scope: 's', key: 'k', payload: { a: 2 } });
    expect(deadLetterReasonOf(reply)).toBe('payload-mismatch');
  });

  it('undefined for results that are not dead-lettered', async () => {
    const idempotency = setup();
    const completed = await idempotency.run({ scope: 's', key: 'done' }, () => 'ok');
    const duplicate = await idempotency.run({ scope: 's', key: 'done' }, () => 'ok');
    const released = await idempotency.run({ scope: 's', key: 'retry' }, fail);
    const acquired = await idempotency.claim({ scope: 's', key: 'held' });
    const conflict = await idempotency.claim({ scope: 's', key: 'held' });
    expect([completed, duplicate, released, acquired, conflict].map((r) => r.outcome)).toEqual([
      'ACQUIRED',
      'DUPLICATE',
      'ACQUIRED',
      'ACQUIRED',
      'CONFLICT',
    ]);
    expect(released).toMatchObject({ status: 'released' });
    for (const r of [completed, duplicate, released, acquired, conflict]) {
      expect(deadLetterReasonOf(r)).toBeUndefined();
    }
    expect(
      deadLetterReasonOf({ outcome: 'UNPROTECTED', status: 'threw', error: new Error('x'), storeError: 1 }),
    ).toBeUndefined();
    expect(
      deadLetterReasonOf({
        outcome: 'ACQUIRED',
        status: 'lease-lost',
        during: 'write',
        handlerStarted: true,
        handlerCompleted: false,
        result: undefined,
        error: new Error('x'),
        fencingToken: 1,
        attempt: 1,
      }),
    ).toBeUndefined();
  });
});

describe('deadLetterOf: one dead letter for a result, whichever broker', () => {
  it('a failed run: its reason, the error described, the token to mark when the FAILED write was recorded', async () => {
    const idempotency = setup({ maxAttempts: 1 });
    const result = await idempotency.run({ scope: 's', key: 'k' }, fail);
    expect(deadLetterOf(result)).toEqual({
      action: 'dead-letter',
      reason: 'attempts-exhausted',
      attempt: 1,
      error: 'Error: boom',
      failedFencingToken: (result as { fencingToken: number }).fencingToken,
    });
  });

  it('a FAILED record: failed-record with its stored error and token; none once it was dead-lettered', async () => {
    const idempotency = setup({ maxAttempts: 1 });
    const request = { scope: 's', key: 'f' };
    const failed = await idempotency.run(request, fail);
    const again = await idempotency.run(request, () => 'never');
    expect(deadLetterOf(again)).toEqual({
      action: 'dead-letter',
      reason: 'failed-record',
      attempt: 1,
      error: 'Error: boom',
      failedFencingToken: (failed as { fencingToken: number }).fencingToken,
    });
    await idempotency.markDeadLettered(request, failed as { fencingToken: number });
    expect(deadLetterOf(await idempotency.run(request, () => 'never'))).toBeUndefined();
  });

  it('a payload mismatch: PayloadMismatchError naming the record state, nothing to mark', async () => {
    const idempotency = setup();
    await idempotency.run({ scope: 's', key: 'p', payload: 'a' }, () => 1);
    const mismatch = await idempotency.run({ scope: 's', key: 'p', payload: 'b' }, () => 2);
    expect(deadLetterOf(mismatch)).toEqual({
      action: 'dead-letter',
      reason: 'payload-mismatch',
      attempt: 1,
      error:
        'PayloadMismatchError [PAYLOAD_MISMATCH]: the idempotency key was first used with another payload (record COMPLETED)',
      failedFencingToken: undefined,
    });
  });

  it('undefined for a completed run', async () => {
    expect(deadLetterOf(await setup().run({ scope: 's', key: 'c' }, () => 1))).toBeUndefined();
  });
});

describe('DEAD_LETTER_FIELDS', () => {
  it('one x-idempotency- name per field, all distinct', () => {
    const names = Object.values(DEAD_LETTER_FIELDS);
    expect(new Set(names).size).toBe(names.length);
    for (const name of names) expect(name).toMatch(/^x-idempotency-[a-z-]+$/);
    expect(DEAD_LETTER_FIELDS).toEqual({
      reason: 'x-idempotency-dead-letter-reason',
      outcome: 'x-idempotency-outcome',
      error: 'x-idempotency-error',
      attempt: 'x-idempotency-attempt',
      key: 'x-idempotency-key',
      scope: 'x-idempotency-scope',
    });
    expect(NO_CLAIM_OUTCOME).toBe('NONE');
  });
});

describe('unprotectedDeadLetter', () => {
  const policy = { maxAttempts: 3, isRetryable: (e: unknown) => !(e instanceof NonRetryableError) };

  it('retries a retryable error below maxAttempts, dead-letters at it', () => {
    expect(unprotectedDeadLetter(new Error('down'), 2, policy)).toBeUndefined();
    expect(unprotectedDeadLetter(new Error('down'), 3, policy)).toEqual({
      action: 'dead-letter',
      reason: 'attempts-exhausted',
      attempt: 3,
      error: 'Error: down',
      failedFencingToken: undefined,
    });
  });

  it('dead-letters a non-retryable error on its first attempt', () => {
    expect(unprotectedDeadLetter(new NonRetryableError('bad card'), 1, policy)).toMatchObject({
      reason: 'non-retryable',
      attempt: 1,
      error: expect.stringContaining('bad card'),
    });
  });
});
