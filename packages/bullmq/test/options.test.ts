import { InvalidOptionError } from '@idempotent-consumer/core';
import { DEAD_LETTER_FIELDS } from '@idempotent-consumer/core/kit';
import type { Job } from 'bullmq';
import { defaultIdempotencyKey, readDeadLetter } from '../src';
import { deadLetterError } from '../src/dead-letter';
import { resolveBullMqOptions } from '../src/options';

const job = (id: string | undefined, data: unknown = {}) => ({ id, data }) as unknown as Job;

describe('defaultIdempotencyKey', () => {
  it("is the jobId the producer set, and no key for BullMQ's own counter", () => {
    expect(defaultIdempotencyKey(job('pay-1'))).toBe('pay-1');
    expect(defaultIdempotencyKey(job('1a'))).toBe('1a');
    expect(defaultIdempotencyKey(job('42'))).toBeUndefined();
    expect(defaultIdempotencyKey(job(undefined))).toBeUndefined();
  });
});

describe('resolveBullMqOptions', () => {
  it('defaults: the queue as scope, a 5 s conflict wait, the data fingerprinted', () => {
    const resolved = resolveBullMqOptions({});
    expect(resolved).toMatchObject({
      scope: undefined,
      missingKey: 'dead-letter',
      maxConflictDelayMs: 5000,
      overrides: { conflictWaitMs: 5000 },
    });
    expect(resolved.fingerprint?.(job('k', { a: 1 }))).toEqual({ a: 1 });
    expect(resolved.fingerprint?.({ id: 'k' } as unknown as Job)).toBeNull();
    expect(resolveBullMqOptions({ fingerprint: false }).fingerprint).toBeUndefined();
  });

  it.each([
    [{ scope: '' }, /scope must be a non-empty string/],
    [{ missingKey: 'drop' }, /missingKey/],
    [{ leaseMs: 0 }, /leaseMs/],
    [{ conflictWaitMs: -1 }, /conflictWaitMs/],
    [{ maxConflictDelayMs: 0 }, /maxConflictDelayMs/],
    [{ idempotencyKey: 'id' }, /idempotencyKey must be a function/],
    [{ fingerprint: 'data' }, /fingerprint must be/],
    [{ storeProbeBackoff: { baseMs: -1 } }, /storeProbeBackoff/],
  ])('refuses %p', (options, message) => {
    expect(() => resolveBullMqOptions(options as never)).toThrow(InvalidOptionError);
    expect(() => resolveBullMqOptions(options as never)).toThrow(message);
  });
});

describe('dead letters', () => {
  const subject = {
    scope: 'pay',
    key: 'k',
    outcome: 'ACQUIRED',
    attempt: 2,
    source: { queue: 'pay', jobId: 'k', attemptsMade: 1 },
  } as const;
  const decision = {
    action: 'dead-letter',
    reason: 'attempts-exhausted',
    attempt: 2,
    error: 'Error: boom',
    failedFencingToken: 7,
  } as const;

  it('fail the job with an UnrecoverableError whose message holds the fields, which readDeadLetter reads back', () => {
    const error = deadLetterError(decision, subject);
    expect(error.name).toBe('UnrecoverableError');
    expect(readDeadLetter(error.message)).toEqual({
      [DEAD_LETTER_FIELDS.reason]: 'attempts-exhausted',
      [DEAD_LETTER_FIELDS.outcome]: 'ACQUIRED',
      [DEAD_LETTER_FIELDS.error]: 'Error: boom',
      [DEAD_LETTER_FIELDS.attempt]: '2',
      [DEAD_LETTER_FIELDS.scope]: 'pay',
      [DEAD_LETTER_FIELDS.key]: 'k',
    });
  });

  it('without a claim: outcome NONE, no key field', () => {
    const fields = readDeadLetter(
      deadLetterError(decision, { ...subject, key: undefined, outcome: undefined }).message,
    );
    expect(fields?.[DEAD_LETTER_FIELDS.outcome]).toBe('NONE');
    expect(fields && DEAD_LETTER_FIELDS.key in fields).toBe(false);
  });

  it.each([undefined, '', 'boom', '{"a":1}', '{not json', '[1]'])(
    'readDeadLetter(%p) is undefined',
    (reason) => {
      expect(readDeadLetter(reason)).toBeUndefined();
    },
  );
});
