import type { PipelineDecision } from '@idempotent-consumer/core/kit';
import { BACK_IN_QUEUE_MS, hasAttemptsLeft, toBullMqDecision } from '../src/decide';

const error = new Error('boom');
const letter = {
  action: 'dead-letter',
  reason: 'payload-mismatch',
  attempt: 1,
  error: 'PayloadMismatchError: …',
  failedFencingToken: undefined,
} as const;

describe('toBullMqDecision (docs/design.md#outcome-to-broker-action, BullMQ column)', () => {
  const rows: [string, PipelineDecision, boolean, object][] = [
    ['completed', { action: 'ack', reason: 'completed' }, true, { action: 'complete', reason: 'completed' }],
    ['duplicate', { action: 'ack', reason: 'duplicate' }, false, { action: 'complete', reason: 'duplicate' }],
    [
      'lease lost after the handler completed',
      { action: 'ack', reason: 'lease-lost' },
      true,
      { action: 'complete', reason: 'lease-lost' },
    ],
    [
      'unprotected run that completed',
      { action: 'ack', reason: 'unprotected' },
      true,
      { action: 'complete', reason: 'unprotected' },
    ],
    [
      'a FAILED record dead-lettered before fails the job again',
      { action: 'ack', reason: 'dead-lettered-before' },
      true,
      { action: 'dead-letter', reason: 'failed-record', attempt: 3, failedFencingToken: undefined },
    ],
    ['a dead letter', letter, true, letter],
    [
      'a CONFLICT moves the job to delayed, at least 1 ms',
      { action: 'retry', reason: 'conflict', delayMs: 0, attempt: 1, error: undefined },
      true,
      { action: 'delay', reason: 'conflict', delayMs: 1 },
    ],
    [
      'a handler error with attempts left is rethrown for BullMQ to retry',
      { action: 'retry', reason: 'handler-error', delayMs: 500, attempt: 2, error },
      true,
      { action: 'retry', reason: 'handler-error', attempt: 2, error },
    ],
    [
      "a handler error on the job's last attempt is rethrown: BullMQ fails the job",
      { action: 'retry', reason: 'handler-error', delayMs: 500, attempt: 2, error },
      false,
      { action: 'fail', reason: 'handler-error', attempt: 2, error },
    ],
    [
      'a lost lease whose handler threw',
      { action: 'retry', reason: 'lease-lost', delayMs: 500, attempt: 1, error },
      true,
      { action: 'retry', reason: 'lease-lost', attempt: 1, error },
    ],
    [
      'a store that did not answer: back to delayed',
      { action: 'leave', reason: 'store-unavailable' },
      true,
      { action: 'delay', reason: 'store-unavailable', delayMs: BACK_IN_QUEUE_MS },
    ],
    [
      'stopping: back at once',
      { action: 'leave', reason: 'stopping' },
      true,
      { action: 'delay', reason: 'stopping', delayMs: 0 },
    ],
    [
      'a store error',
      { action: 'leave', reason: 'error' },
      true,
      { action: 'delay', reason: 'error', delayMs: BACK_IN_QUEUE_MS },
    ],
  ];
  it.each(rows)('%s', (_, decision, attemptsLeft, expected) => {
    expect(toBullMqDecision(decision, attemptsLeft, 3)).toMatchObject(expected);
  });
});

describe('hasAttemptsLeft', () => {
  it.each([
    [0, undefined, false],
    [0, 0, false],
    [0, 1, false],
    [0, 2, true],
    [1, 2, false],
    [3, 5, true],
    [4, 5, false],
  ])('attemptsMade %i of attempts %p: %p', (attemptsMade, attempts, expected) => {
    expect(hasAttemptsLeft({ attemptsMade, opts: { attempts } })).toBe(expected);
  });
});
