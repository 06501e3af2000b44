import { InvalidOptionError } from '@idempotent-consumer/core';
import { DEAD_LETTER_FIELDS } from '@idempotent-consumer/core/kit';
import type { ConsumeMessage } from 'amqplib';
import { DEAD_LETTER_HEADERS } from '../src';
import { decide } from '../src/decide';
import { pickDelayTier } from '../src/delay-tiers';
import { defaultIdempotencyKey } from '../src/idempotency-key';
import { resolveConsumerOptions } from '../src/options';

const policy = {
  delayTiersMs: [100, 1000, 5000],
  retryBackoff: { baseMs: 200, factor: 2, maxMs: 10_000, jitter: 'none' as const },
  maxAttempts: 3,
  maxConflictDelayMs: 60_000,
};
const executed = { outcome: 'ACQUIRED', fencingToken: 1, attempt: 2 } as const;

describe('decide (docs/design.md#outcome-to-broker-action, RabbitMQ column)', () => {
  it('acks completed, duplicate and lease-lost-after-completion', () => {
    expect(
      decide(
        { ...executed, status: 'completed', result: 1, recorded: true, resultOmitted: false, durationMs: 1 },
        policy,
      ),
    ).toEqual({
      action: 'ack',
      reason: 'completed',
    });
    expect(
      decide(
        { outcome: 'DUPLICATE', result: 1, hasResult: true, fencingToken: 1, attempt: 1, completedAtMs: 0 },
        policy,
      ),
    ).toEqual({ action: 'ack', reason: 'duplicate' });
    expect(
      decide(
        {
          ...executed,
          status: 'lease-lost',
          during: 'write',
          handlerStarted: true,
          handlerCompleted: true,
          result: 1,
          error: undefined,
        },
        policy,
      ),
    ).toEqual({ action: 'ack', reason: 'lease-lost' });
  });

  it('delays a CONFLICT for the remaining lease, rounded up to a tier and bounded by the longest', () => {
    const conflict = (retryAfterMs: number) =>
      decide({ outcome: 'CONFLICT', retryAfterMs, fencingToken: 1, attempt: 1 }, policy);
    expect(conflict(0)).toMatchObject({
      action: 'retry',
      reason: 'conflict',
      delayMs: 100,
      wantedDelayMs: 1,
    });
    expect(conflict(101)).toMatchObject({ delayMs: 1000 });
    expect(conflict(60_000)).toMatchObject({ delayMs: 5000, wantedDelayMs: 60_000 });
  });

  it('caps a CONFLICT delay at maxConflictDelayMs, choosing among the tiers not longer than the cap', () => {
    const capped = { ...policy, maxConflictDelayMs: 1000 };
    const conflict = (retryAfterMs: number) =>
      decide({ outcome: 'CONFLICT', retryAfterMs, fencingToken: 1, attempt: 1 }, capped);
    expect(conflict(30_000)).toMatchObject({ delayMs: 1000, wantedDelayMs: 1000 });
    expect(conflict(50)).toMatchObject({ delayMs: 100, wantedDelayMs: 50 });
    // A cap below every tier: the smallest tier.
    expect(
      decide(
        { outcome: 'CONFLICT', retryAfterMs: 30_000, fencingToken: 1, attempt: 1 },
        { ...policy, maxConflictDelayMs: 10 },
      ),
    ).toMatchObject({ delayMs: 100, wantedDelayMs: 10 });
  });

  it('delays a released attempt by the backoff of its attempt; lease lost while throwing too', () => {
    expect(
      decide({ ...executed, status: 'released', error: new Error('x'), recorded: true }, policy),
    ).toMatchObject({
      action: 'retry',
      reason: 'handler-error',
      wantedDelayMs: 400,
      delayMs: 1000,
      attempt: 2,
    });
    expect(
      decide(
        {
          ...executed,
          status: 'lease-lost',
          during: 'heartbeat',
          handlerStarted: true,
          handlerCompleted: false,
          result: undefined,
          error: 1,
        },
        policy,
      ),
    ).toMatchObject({ action: 'retry', reason: 'lease-lost' });
  });

  it('dead-letters failures, payload mismatches and FAILED records', () => {
    expect(
      decide(
        {
          ...executed,
          status: 'failed',
          error: new Error('x'),
          reason: 'attempts-exhausted',
          recorded: true,
        },
        policy,
      ),
    ).toEqual({
      action: 'dead-letter',
      reason: 'attempts-exhausted',
      attempt: 2,
      error: 'Error: x',
      failedFencingToken: 1,
    });
    expect(
      decide({ outcome: 'PAYLOAD_MISMATCH', state: 'COMPLETED', fencingToken: 1, attempt: 1 }, policy),
    ).toMatchObject({ action: 'dead-letter', reason: 'payload-mismatch' });
    expect(
      decide({ outcome: 'FAILED', error: 'E', deadLettered: false, fencingToken: 1, attempt: 5 }, policy),
    ).toEqual({
      action: 'dead-letter',
      reason: 'failed-record',
      attempt: 5,
      error: 'E',
      failedFencingToken: 1,
    });
    expect(
      decide({ outcome: 'FAILED', error: 'E', deadLettered: true, fencingToken: 1, attempt: 5 }, policy),
    ).toEqual({ action: 'ack', reason: 'dead-lettered-before' });
  });

  it('counts unprotected attempts from the header', () => {
    const threw = {
      outcome: 'UNPROTECTED',
      status: 'threw',
      error: new Error('x'),
      storeError: undefined,
    } as const;
    expect(decide(threw, policy, 2)).toMatchObject({ action: 'retry', attempt: 2 });
    expect(decide(threw, policy, 3)).toMatchObject({
      action: 'dead-letter',
      reason: 'attempts-exhausted',
    });
    expect(decide(threw, { ...policy, isRetryable: () => false }, 1)).toMatchObject({
      reason: 'non-retryable',
    });
  });
});

describe('helpers', () => {
  it('writes the dead-letter fields under the core names shared by every adapter', () => {
    expect(DEAD_LETTER_HEADERS).toMatchObject(DEAD_LETTER_FIELDS);
  });

  it('pickDelayTier rounds up, within a cap when given', () => {
    expect([0, 100, 101, 999, 5000, 9999].map((d) => pickDelayTier([100, 1000, 5000], d))).toEqual([
      100, 100, 1000, 1000, 5000, 5000,
    ]);
    expect([0, 101, 9999].map((d) => pickDelayTier([100, 1000, 5000], d, 1000))).toEqual([100, 1000, 1000]);
    expect(pickDelayTier([100, 1000, 5000], 9999, 50)).toBe(100);
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
