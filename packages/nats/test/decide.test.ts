import type { PipelineDecision } from '@idempotent-consumer/core/kit';
import { type Decision, type DecisionPolicy, toNatsDecision } from '../src/decide';

const unlimited: DecisionPolicy = { maxDeliver: -1, requeueDelayMs: 1000 };
const five: DecisionPolicy = { maxDeliver: 5, requeueDelayMs: 1000 };
const boom = new Error('boom');
const letter = {
  action: 'dead-letter',
  reason: 'failed-record',
  attempt: 3,
  error: 'Error: boom',
  failedFencingToken: 9,
} as const;

const table: [string, PipelineDecision, number, DecisionPolicy, Decision][] = [
  ['completed: ack', { action: 'ack', reason: 'completed' }, 1, five, { action: 'ack', reason: 'completed' }],
  [
    'duplicate on the last delivery: ack',
    { action: 'ack', reason: 'duplicate' },
    5,
    five,
    { action: 'ack', reason: 'duplicate' },
  ],
  ['a dead letter stays one', letter, 1, five, letter],
  [
    'handler error: nak after its backoff',
    { action: 'retry', reason: 'handler-error', delayMs: 4000, attempt: 2, error: boom },
    2,
    unlimited,
    { action: 'nak', reason: 'handler-error', delayMs: 4000 },
  ],
  [
    'conflict with no time left: nak after 1 ms, never at once',
    { action: 'retry', reason: 'conflict', delayMs: 0, attempt: 1, error: undefined },
    1,
    five,
    { action: 'nak', reason: 'conflict', delayMs: 1 },
  ],
  [
    'stopping: nak at once, another consumer takes it',
    { action: 'leave', reason: 'stopping' },
    1,
    five,
    { action: 'nak', reason: 'stopping', delayMs: 0 },
  ],
  [
    'store unavailable: nak after the requeue delay',
    { action: 'leave', reason: 'store-unavailable' },
    1,
    five,
    { action: 'nak', reason: 'store-unavailable', delayMs: 1000 },
  ],
  [
    'abandoned: left to ack_wait',
    { action: 'leave', reason: 'abandoned' },
    5,
    five,
    { action: 'leave', reason: 'abandoned' },
  ],
  [
    'handler error on the last delivery: dead-lettered, JetStream would drop it',
    { action: 'retry', reason: 'handler-error', delayMs: 4000, attempt: 2, error: boom },
    5,
    five,
    {
      action: 'dead-letter',
      reason: 'attempts-exhausted',
      attempt: 2,
      error: 'JetStream delivers it no more (max_deliver 5): Error: boom',
      failedFencingToken: undefined,
    },
  ],
  [
    'store unavailable on the last delivery: dead-lettered too',
    { action: 'leave', reason: 'store-unavailable' },
    6,
    five,
    {
      action: 'dead-letter',
      reason: 'attempts-exhausted',
      attempt: 0,
      error: 'JetStream delivers it no more (max_deliver 5): store-unavailable',
      failedFencingToken: undefined,
    },
  ],
  [
    'no max_deliver: a late delivery is still nak-ed',
    { action: 'retry', reason: 'conflict', delayMs: 300, attempt: 1, error: undefined },
    500,
    { maxDeliver: 0, requeueDelayMs: 1000 },
    { action: 'nak', reason: 'conflict', delayMs: 300 },
  ],
];

describe('toNatsDecision', () => {
  it.each(table)('%s', (_name, decision, deliveryCount, policy, expected) => {
    expect(toNatsDecision(decision, deliveryCount, policy)).toEqual(expected);
  });
});
