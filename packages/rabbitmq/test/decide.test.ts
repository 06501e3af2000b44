import { DEAD_LETTER_FIELDS, InvalidOptionError } from '@idempotent-consumer/core';
import type { ConsumeMessage } from 'amqplib';
import { decideAction, defaultIdempotencyKey, HEADERS, pickDelayTier, resolveConsumerOptions } from '../src';

const policy = {
  delayTiersMs: [100, 1000, 5000],
  retryBackoff: { baseMs: 200, factor: 2, maxMs: 10_000, jitter: 'none' as const },
  maxAttempts: 3,
};
const executed = { outcome: 'ACQUIRED', fencingToken: 1, attempt: 2 } as const;

describe('decideAction (DESIGN.md, RabbitMQ column)', () => {
  it('acks completed, duplicate and lease-lost-after-completion', () => {
    expect(decideAction({ ...executed, status: 'completed', result: 1, recorded: true }, policy)).toEqual({
      kind: 'ack',
      reason: 'completed',
    });
    expect(
      decideAction(
        { outcome: 'DUPLICATE', result: 1, hasResult: true, fencingToken: 1, attempt: 1, completedAtMs: 0 },
        policy,
      ),
    ).toEqual({ kind: 'ack', reason: 'duplicate' });
    expect(
      decideAction(
        { ...executed, status: 'lease-lost', handlerCompleted: true, result: 1, error: undefined },
        policy,
      ),
    ).toEqual({ kind: 'ack', reason: 'lease-lost' });
  });

  it('delays a CONFLICT for the remaining lease, rounded up to a tier and bounded by the longest', () => {
    const conflict = (retryAfterMs: number) =>
      decideAction({ outcome: 'CONFLICT', retryAfterMs, fencingToken: 1, attempt: 1 }, policy);
    expect(conflict(0)).toMatchObject({ kind: 'delay', reason: 'conflict', delayMs: 100, wantedDelayMs: 1 });
    expect(conflict(101)).toMatchObject({ delayMs: 1000 });
    expect(conflict(60_000)).toMatchObject({ delayMs: 5000, wantedDelayMs: 60_000 });
  });

  it('delays a released attempt by the backoff of its attempt; lease lost while throwing too', () => {
    expect(
      decideAction({ ...executed, status: 'released', error: new Error('x'), recorded: true }, policy),
    ).toMatchObject({
      kind: 'delay',
      reason: 'handler-error',
      wantedDelayMs: 400,
      delayMs: 1000,
      attempt: 2,
    });
    expect(
      decideAction(
        { ...executed, status: 'lease-lost', handlerCompleted: false, result: undefined, error: 1 },
        policy,
      ),
    ).toMatchObject({ kind: 'delay', reason: 'lease-lost' });
  });

  it('dead-letters failures, payload mismatches and FAILED records', () => {
    expect(
      decideAction(
        {
          ...executed,
          status: 'failed',
          error: new Error('x'),
          reason: 'attempts-exhausted',
          recorded: true,
        },
        policy,
      ),
    ).toEqual({ kind: 'dead-letter', reason: 'attempts-exhausted', attempt: 2, error: 'Error: x' });
    expect(
      decideAction({ outcome: 'PAYLOAD_MISMATCH', state: 'COMPLETED', fencingToken: 1, attempt: 1 }, policy),
    ).toMatchObject({ kind: 'dead-letter', reason: 'payload-mismatch' });
    expect(decideAction({ outcome: 'FAILED', error: 'E', fencingToken: 1, attempt: 5 }, policy)).toEqual({
      kind: 'dead-letter',
      reason: 'failed-record',
      attempt: 5,
      error: 'E',
    });
  });

  it('counts unprotected attempts from the header', () => {
    const threw = {
      outcome: 'UNPROTECTED',
      status: 'threw',
      error: new Error('x'),
      storeError: undefined,
    } as const;
    expect(decideAction(threw, policy, 2)).toMatchObject({ kind: 'delay', attempt: 2 });
    expect(decideAction(threw, policy, 3)).toMatchObject({
      kind: 'dead-letter',
      reason: 'attempts-exhausted',
    });
    expect(decideAction(threw, policy, 1, () => false)).toMatchObject({ reason: 'non-retryable' });
  });
});

describe('helpers', () => {
  it('writes the dead-letter fields under the core names shared by every adapter', () => {
    expect({
      reason: HEADERS.deadLetterReason,
      outcome: HEADERS.outcome,
      error: HEADERS.error,
      attempt: HEADERS.attempt,
      key: HEADERS.key,
      scope: HEADERS.scope,
    }).toEqual(DEAD_LETTER_FIELDS);
  });

  it('pickDelayTier rounds up', () => {
    expect([0, 100, 101, 999, 5000, 9999].map((d) => pickDelayTier([100, 1000, 5000], d))).toEqual([
      100, 100, 1000, 1000, 5000, 5000,
    ]);
  });

  it('reads the key from message-id, else the idempotency-key header', () => {
    const msg = (messageId: unknown, headers: Record<string, unknown> = {}) =>
      ({ properties: { messageId, headers } }) as unknown as ConsumeMessage;
    expect(defaultIdempotencyKey(msg('m-1', { 'idempotency-key': 'h' }))).toBe('m-1');
    expect(defaultIdempotencyKey(msg(undefined, { 'idempotency-key': 'h-1' }))).toBe('h-1');
    expect(defaultIdempotencyKey(msg('', {}))).toBeUndefined();
  });

  it('refuses a lease not below the broker ack timeout, and bad tiers', () => {
    expect(() => resolveConsumerOptions({ queue: 'q' }, 1_800_000)).toThrow(InvalidOptionError);
    expect(() => resolveConsumerOptions({ queue: 'q', delayTiersMs: [] }, 1000)).toThrow(InvalidOptionError);
    expect(() => resolveConsumerOptions({ queue: 'q', delayTiersMs: [0] }, 1000)).toThrow(InvalidOptionError);
    expect(() => resolveConsumerOptions({ queue: '' }, 1000)).toThrow(InvalidOptionError);
    expect(resolveConsumerOptions({ queue: 'q', delayTiersMs: [500, 100] }, 1000).delayTiersMs).toEqual([
      100, 500,
    ]);
  });
});
