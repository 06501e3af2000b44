import { NonRetryableError, type RunResult } from '@idempotent-consumer/core';
import { type Decision, type DecisionPolicy, decide, type MessageResult } from '../src/decide';

const policy: DecisionPolicy = {
  retryBackoff: { baseMs: 1000, factor: 2, maxMs: 300_000, jitter: 'none' },
  maxConflictDelayMs: 5000,
  maxAttempts: 3,
  isRetryable: (error) => !(error instanceof NonRetryableError),
};
const exec = { outcome: 'ACQUIRED', fencingToken: 7, attempt: 2 } as const;
const boom = new Error('boom');
const fatal = new NonRetryableError('declined');
const run = (result: RunResult<unknown>, receiveCount = 1): MessageResult<unknown> => ({
  kind: 'run',
  result,
  receiveCount,
});

const table: [string, MessageResult<unknown>, Decision][] = [
  [
    'completed: delete',
    run({ ...exec, status: 'completed', result: 1, recorded: true, resultOmitted: false, durationMs: 1 }),
    { action: 'delete', reason: 'completed' },
  ],
  [
    'completed, not recorded (store down at the write): still delete',
    run({ ...exec, status: 'completed', result: 1, recorded: false, resultOmitted: false, durationMs: 1 }),
    { action: 'delete', reason: 'completed' },
  ],
  [
    'DUPLICATE: delete',
    run({ outcome: 'DUPLICATE', result: 1, hasResult: true, fencingToken: 1, attempt: 1, completedAtMs: 0 }),
    { action: 'delete', reason: 'duplicate' },
  ],
  [
    'released at receive 3: visibility from the backoff (4 s)',
    run({ ...exec, status: 'released', error: boom, recorded: true }, 3),
    { action: 'change-visibility', reason: 'handler-error', visibilityTimeoutSeconds: 4 },
  ],
  [
    'CONFLICT with 20 s of lease left: capped at maxConflictDelayMs',
    run({ outcome: 'CONFLICT', retryAfterMs: 20_000, fencingToken: 1, attempt: 1 }),
    { action: 'change-visibility', reason: 'conflict', visibilityTimeoutSeconds: 5 },
  ],
  [
    'CONFLICT with 10 ms left: at least 1 s',
    run({ outcome: 'CONFLICT', retryAfterMs: 10, fencingToken: 1, attempt: 1 }),
    { action: 'change-visibility', reason: 'conflict', visibilityTimeoutSeconds: 1 },
  ],
  [
    'failed (attempts exhausted): dead-letter with its reason and attempt',
    run({ ...exec, status: 'failed', error: boom, reason: 'attempts-exhausted', recorded: true }),
    {
      action: 'dead-letter',
      reason: 'attempts-exhausted',
      attempt: 2,
      error: 'Error: boom',
      failedFencingToken: 7,
    },
  ],
  [
    'PAYLOAD_MISMATCH: dead-letter',
    run({ outcome: 'PAYLOAD_MISMATCH', state: 'COMPLETED', fencingToken: 1, attempt: 1 }),
    {
      action: 'dead-letter',
      reason: 'payload-mismatch',
      attempt: 1,
      error:
        'PayloadMismatchError [PAYLOAD_MISMATCH]: the idempotency key was first used with another payload (record COMPLETED)',
      failedFencingToken: undefined,
    },
  ],
  [
    'FAILED record: dead-letter as failed-record',
    run({ outcome: 'FAILED', error: 'Error: x', deadLettered: false, fencingToken: 1, attempt: 3 }),
    { action: 'dead-letter', reason: 'failed-record', attempt: 3, error: 'Error: x', failedFencingToken: 1 },
  ],
  [
    'lease lost: leave',
    run({
      ...exec,
      status: 'lease-lost',
      during: 'heartbeat',
      handlerStarted: true,
      handlerCompleted: false,
      result: undefined,
      error: boom,
    }),
    { action: 'leave', reason: 'lease-lost' },
  ],
  [
    'unprotected, returned: delete',
    run({ outcome: 'UNPROTECTED', status: 'completed', result: 1, storeError: undefined }),
    { action: 'delete', reason: 'unprotected' },
  ],
  [
    'unprotected, threw at receive 2 of 3: retry',
    run({ outcome: 'UNPROTECTED', status: 'threw', error: boom, storeError: undefined }, 2),
    { action: 'change-visibility', reason: 'handler-error', visibilityTimeoutSeconds: 2 },
  ],
  [
    'unprotected, threw at receive 3 of 3: dead-letter, attempts exhausted (bounded)',
    run({ outcome: 'UNPROTECTED', status: 'threw', error: boom, storeError: undefined }, 3),
    {
      action: 'dead-letter',
      reason: 'attempts-exhausted',
      attempt: 3,
      error: 'Error: boom',
      failedFencingToken: undefined,
    },
  ],
  [
    'unprotected, non-retryable: dead-letter at once',
    run({ outcome: 'UNPROTECTED', status: 'threw', error: fatal, storeError: undefined }, 1),
    {
      action: 'dead-letter',
      reason: 'non-retryable',
      attempt: 1,
      error: 'NonRetryableError [NON_RETRYABLE]: declined',
      failedFencingToken: undefined,
    },
  ],
  [
    'missing key: dead-letter, no claim',
    { kind: 'missing-key', error: boom, receiveCount: 1 },
    {
      action: 'dead-letter',
      reason: 'missing-key',
      attempt: 0,
      error: 'Error: boom',
      failedFencingToken: undefined,
    },
  ],
  [
    'invalid key (the extractor threw): dead-letter',
    { kind: 'invalid-key', error: boom, receiveCount: 1 },
    {
      action: 'dead-letter',
      reason: 'invalid-key',
      attempt: 0,
      error: 'Error: boom',
      failedFencingToken: undefined,
    },
  ],
  [
    'store unavailable: leave invisible',
    { kind: 'store-unavailable', error: boom, receiveCount: 1 },
    { action: 'leave', reason: 'store-unavailable' },
  ],
  [
    'FIFO predecessor unfinished: visible again at once',
    { kind: 'fifo-blocked', receiveCount: 1 },
    { action: 'change-visibility', reason: 'fifo-blocked', visibilityTimeoutSeconds: 0 },
  ],
  [
    'abandoned by stop() before its handler started: leave',
    { kind: 'abandoned', receiveCount: 1 },
    { action: 'leave', reason: 'abandoned' },
  ],
  [
    'unexpected error: leave',
    { kind: 'error', error: boom, receiveCount: 1 },
    { action: 'leave', reason: 'error' },
  ],
];

describe('decide (SQS)', () => {
  it.each(table)('%s', (_name, input, expected) => {
    expect(decide(input, policy)).toEqual(expected);
  });

  it('counts an isRetryable that throws as retryable', () => {
    const throwing = {
      ...policy,
      isRetryable: () => {
        throw new Error('bug');
      },
    };
    const input = run({ outcome: 'UNPROTECTED', status: 'threw', error: boom, storeError: undefined }, 1);
    expect(decide(input, throwing)).toMatchObject({ action: 'change-visibility', reason: 'handler-error' });
  });
});
