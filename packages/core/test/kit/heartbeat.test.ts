import { Idempotency, MemoryIdempotencyStore } from '../../src';
import { heartbeatIntervalFor } from '../../src/kit/heartbeat';

describe('kit: heartbeatIntervalFor', () => {
  it.each([
    // leaseMs, maxIntervalMs, expected
    [30_000, undefined, 10_000],
    [30_000, 5_000, 5_000],
    [30_000, 20_000, 10_000],
    [10, undefined, 3],
    [2, undefined, 1],
    [1, undefined, 1],
    [3_000, 1, 1],
  ])('leaseMs %p, maxIntervalMs %p → %p', (leaseMs, maxIntervalMs, expected) => {
    expect(heartbeatIntervalFor(leaseMs, maxIntervalMs)).toBe(expected);
  });

  it('is what the runner defaults heartbeatIntervalMs to', () => {
    const idempotency = new Idempotency(
      { store: new MemoryIdempotencyStore(), logger: false },
      { leaseMs: 900 },
    );
    expect(idempotency.options.heartbeatIntervalMs).toBe(heartbeatIntervalFor(900));
  });
});
