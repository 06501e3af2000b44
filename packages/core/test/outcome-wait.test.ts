import type { ClaimReply } from '../src/store/idempotency-store';
import { type OutcomeListen, waitForOutcome } from '../src/store/outcome-wait';

const conflict: ClaimReply = { outcome: 'CONFLICT', fencingToken: 1, attempt: 1, remainingLeaseMs: 60_000 };

/**
 * A subscription that is not confirmed until the test says so: a subscriber connection still connecting
 * or reconnecting (RedisIdempotencyStore's OutcomeNotifications gives up on it only after its
 * subscribeTimeoutMs). `stops` counts the unsubscriptions of a late confirmation.
 */
function pendingSubscription() {
  let confirm!: () => void;
  const stop = jest.fn();
  const listen: OutcomeListen = () =>
    new Promise<() => void>((resolve) => {
      confirm = () => resolve(stop);
    });
  return { listen, confirm: () => confirm(), stop };
}

describe('waitForOutcome while the subscription is not confirmed', () => {
  it('ends at its bound (timeoutMs) with the last CONFLICT, not when the subscription is confirmed', async () => {
    const { listen, confirm, stop } = pendingSubscription();
    const claim = jest.fn(async () => conflict);
    // Never confirmed during the wait: the wait must still end by its bound.
    await expect(waitForOutcome(claim, listen, { timeoutMs: 50 })).resolves.toBe(conflict);
    expect(claim).toHaveBeenCalled();
    // Confirmed after the wait ended: unsubscribed at once, not left listening.
    confirm();
    await new Promise((resolve) => setImmediate(resolve));
    expect(stop).toHaveBeenCalledTimes(1);
  });

  it('ends when its signal aborts, without waiting for the subscription', async () => {
    const { listen } = pendingSubscription();
    const claim = jest.fn(async () => conflict);
    const abort = new AbortController();
    const waiting = waitForOutcome(claim, listen, { timeoutMs: 600_000, signal: abort.signal });
    abort.abort();
    await expect(waiting).resolves.toBe(conflict);
  });

  it('a subscription confirmed in time is used: a notification ends the wait', async () => {
    const { listen, confirm, stop } = pendingSubscription();
    let wakeHolder: (() => void) | undefined;
    const listening: OutcomeListen = (wake) => {
      wakeHolder = wake;
      return listen(wake);
    };
    let outcome: ClaimReply = conflict;
    let claimed!: () => void;
    const firstClaim = new Promise<void>((resolve) => (claimed = resolve));
    const claim = jest.fn(async () => {
      claimed();
      return outcome;
    });
    const waiting = waitForOutcome(claim, listening, { timeoutMs: 600_000 });
    confirm();
    await firstClaim;
    outcome = { ...conflict, outcome: 'FAILED', error: 'x', deadLettered: false } as ClaimReply;
    await new Promise((resolve) => setImmediate(resolve));
    wakeHolder!();
    await expect(waiting).resolves.toMatchObject({ outcome: 'FAILED' });
    expect(stop).toHaveBeenCalledTimes(1);
  });
});
