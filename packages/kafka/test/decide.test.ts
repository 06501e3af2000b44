import { NonRetryableError, type RunResult } from '@idempotent-consumer/core';
import { type Decision, type DecisionPolicy, decide } from '../src/decide';

const policy: DecisionPolicy = {
  retryBackoff: { baseMs: 100, factor: 10, maxMs: 60_000, jitter: 'none' },
  maxInlineDelayMs: 500,
  maxConflictDelayMs: 5000,
  maxAttempts: 3,
  isRetryable: (error) => !(error instanceof NonRetryableError),
};
const acquired = { outcome: 'ACQUIRED', fencingToken: 7, attempt: 1 } as const;
const boom = new Error('boom');
const declined = new NonRetryableError('declined');

const cases: [string, RunResult<unknown>, Decision, number?][] = [
  [
    'completed',
    { ...acquired, status: 'completed', result: 1, recorded: true, resultOmitted: false, durationMs: 1 },
    { action: 'resolve', reason: 'completed' },
  ],
  [
    'duplicate',
    { outcome: 'DUPLICATE', result: 1, hasResult: true, fencingToken: 1, attempt: 1, completedAtMs: 0 },
    { action: 'resolve', reason: 'duplicate' },
  ],
  [
    'released, short backoff: inline retry',
    { ...acquired, status: 'released', error: boom, recorded: true },
    { action: 'retry', reason: 'handler-error', delayMs: 100, error: boom },
  ],
  [
    'released, long backoff: pause',
    { ...acquired, attempt: 2, status: 'released', error: boom, recorded: true },
    { action: 'pause', reason: 'handler-error', delayMs: 1000, error: boom },
  ],
  [
    'failed now (attempts exhausted), recorded: dead-letter and mark',
    { ...acquired, attempt: 3, status: 'failed', error: boom, reason: 'attempts-exhausted', recorded: true },
    {
      action: 'dead-letter',
      reason: 'attempts-exhausted',
      attempt: 3,
      error: 'Error: boom',
      failedFencingToken: 7,
    },
  ],
  [
    'failed, not recorded: dead-letter without a mark',
    { ...acquired, status: 'failed', error: declined, reason: 'non-retryable', recorded: false },
    {
      action: 'dead-letter',
      reason: 'non-retryable',
      attempt: 1,
      error: 'NonRetryableError [NON_RETRYABLE]: declined',
      failedFencingToken: undefined,
    },
  ],
  [
    'lease lost after the handler completed: resolve',
    {
      ...acquired,
      status: 'lease-lost',
      during: 'write',
      handlerStarted: true,
      handlerCompleted: true,
      result: 1,
      error: undefined,
    },
    { action: 'resolve', reason: 'lease-lost' },
  ],
  [
    'lease lost before completion: claim again at once',
    {
      ...acquired,
      status: 'lease-lost',
      during: 'heartbeat',
      handlerStarted: true,
      handlerCompleted: false,
      result: undefined,
      error: boom,
    },
    { action: 'retry', reason: 'lease-lost', delayMs: 0, error: boom },
  ],
  [
    'CONFLICT: pause for the remaining lease, capped',
    { outcome: 'CONFLICT', retryAfterMs: 60_000, fencingToken: 1, attempt: 1 },
    { action: 'pause', reason: 'conflict', delayMs: 5000, error: undefined },
  ],
  [
    'CONFLICT about to end: at least 100 ms',
    { outcome: 'CONFLICT', retryAfterMs: 3, fencingToken: 1, attempt: 1 },
    { action: 'pause', reason: 'conflict', delayMs: 100, error: undefined },
  ],
  [
    'PAYLOAD_MISMATCH: dead-letter',
    { outcome: 'PAYLOAD_MISMATCH', state: 'COMPLETED', fencingToken: 1, attempt: 1 },
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
    'FAILED record not yet dead-lettered: dead-letter and mark',
    { outcome: 'FAILED', error: 'Error: x', deadLettered: false, fencingToken: 4, attempt: 3 },
    { action: 'dead-letter', reason: 'failed-record', attempt: 3, error: 'Error: x', failedFencingToken: 4 },
  ],
  [
    'FAILED record already dead-lettered: resolve',
    { outcome: 'FAILED', error: 'Error: x', deadLettered: true, fencingToken: 4, attempt: 3 },
    { action: 'resolve', reason: 'dead-lettered-before' },
  ],
  [
    'UNPROTECTED completed: resolve',
    { outcome: 'UNPROTECTED', status: 'completed', result: 1, storeError: undefined },
    { action: 'resolve', reason: 'unprotected' },
  ],
  [
    'UNPROTECTED threw, first run: retry',
    { outcome: 'UNPROTECTED', status: 'threw', error: boom, storeError: undefined },
    { action: 'retry', reason: 'handler-error', delayMs: 100, error: boom },
    1,
  ],
  [
    'UNPROTECTED threw at maxAttempts: dead-letter',
    { outcome: 'UNPROTECTED', status: 'threw', error: boom, storeError: undefined },
    {
      action: 'dead-letter',
      reason: 'attempts-exhausted',
      attempt: 3,
      error: 'Error: boom',
      failedFencingToken: undefined,
    },
    3,
  ],
  [
    'UNPROTECTED non-retryable: dead-letter at once',
    { outcome: 'UNPROTECTED', status: 'threw', error: declined, storeError: undefined },
    {
      action: 'dead-letter',
      reason: 'non-retryable',
      attempt: 1,
      error: 'NonRetryableError [NON_RETRYABLE]: declined',
      failedFencingToken: undefined,
    },
    1,
  ],
];

describe('decide (docs/design.md#outcome-to-broker-action, Kafka column)', () => {
  // A rest parameter: jest takes a 4th declared parameter beyond a 3-element row for a `done` callback.
  it.each(cases)('%s', (_name, result, expected, ...unprotectedAttempt) => {
    expect(decide(result, policy, unprotectedAttempt[0])).toEqual(expected);
  });
});
