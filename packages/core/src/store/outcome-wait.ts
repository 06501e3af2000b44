import { performance } from 'node:perf_hooks';
import { InvalidOptionError } from '../errors';
import { MAX_TIMER_MS } from '../kit/long-timeout';
import type { ClaimReply, OutcomeWaitOptions } from './idempotency-store';

/**
 * Subscribes to the outcome notifications of one record. `wake` is called whenever its holder completes,
 * releases or fails it. Resolves with the function that unsubscribes. It may reject, and the wait then polls.
 */
export type OutcomeListen = (wake: () => void) => Promise<() => void>;

/** Polling intervals of a wait, in milliseconds, from `firstMs` doubling up to `capMs`. */
export interface PollIntervals {
  readonly firstMs: number;
  readonly capMs: number;
}

/** Polling when notifications arrive, where polls only cover a lost notification. */
export const POLL_WITH_NOTIFICATIONS: PollIntervals = { firstMs: 25, capMs: 250 };
/** Polling when no notification can arrive, because the subscription failed. */
export const POLL_WITHOUT_NOTIFICATIONS: PollIntervals = { firstMs: 2, capMs: 20 };

/**
 * The wait of {@link IdempotencyStore.waitForOutcome}, shared by the stores. It subscribes, then claims again
 * whenever a notification arrives, at doubling polling intervals and when the holder's lease ends, until a
 * reply is not CONFLICT or the bound passes. The subscription comes before the first claim, so an outcome
 * written in between is never missed. A subscription not confirmed by the bound, or before the signal aborts,
 * is not waited for any longer. The wait then claims once and ends, see `subscribe`, so it never lasts past
 * `timeoutMs` plus one claim.
 *
 * @throws {@link InvalidOptionError} when `timeoutMs` is not an integer >= 0.
 */
export async function waitForOutcome(
  claim: () => Promise<ClaimReply>,
  listen: OutcomeListen,
  wait: OutcomeWaitOptions,
): Promise<ClaimReply> {
  if (!Number.isSafeInteger(wait?.timeoutMs) || wait.timeoutMs < 0) {
    throw new InvalidOptionError(`timeoutMs must be an integer >= 0, got ${wait?.timeoutMs}`);
  }
  const deadline = performance.now() + wait.timeoutMs;
  let notifications = 0;
  let wakeUp: (() => void) | undefined;
  const wake = () => {
    notifications++;
    wakeUp?.();
  };
  const unsubscribe = await subscribe(listen, wake, deadline, wait.signal);
  const polls = unsubscribe ? POLL_WITH_NOTIFICATIONS : POLL_WITHOUT_NOTIFICATIONS;
  try {
    for (let i = 0; ; i++) {
      const seen = notifications;
      wait.onClaim?.();
      const reply = await claim();
      if (reply.outcome !== 'CONFLICT') return reply;
      const left = deadline - performance.now();
      if (left <= 0 || wait.signal?.aborted) return reply;
      if (notifications !== seen) continue; // an outcome was published while the claim was in flight
      const delayMs = Math.min(
        left,
        reply.remainingLeaseMs + 1,
        polls.firstMs * 2 ** Math.min(i, 16),
        polls.capMs,
      );
      await new Promise<void>((resolve) => {
        const done = () => {
          clearTimeout(timer);
          wakeUp = undefined;
          wait.signal?.removeEventListener('abort', done);
          resolve();
        };
        const timer = setTimeout(done, Math.max(1, Math.ceil(delayMs)));
        wakeUp = done;
        wait.signal?.addEventListener('abort', done, { once: true });
      });
    }
  } finally {
    unsubscribe?.();
  }
}

/**
 * `listen(wake)`, awaited until `deadline` or `signal` at most. Resolves with the function that unsubscribes,
 * or `undefined` when there is no subscription to count on, because it failed or was not confirmed in time.
 * It is bounded because a subscriber connection that is connecting or reconnecting confirms only when it is
 * back, and the store gives up on it only after its own `subscribeTimeoutMs` of up to a second. Awaited
 * unbounded, that held a shorter `conflictWaitMs` wait, or one whose signal aborted, until then. A
 * subscription confirmed after the wait gave up on it is ended at once.
 */
async function subscribe(
  listen: OutcomeListen,
  wake: () => void,
  deadline: number,
  signal: AbortSignal | undefined,
): Promise<(() => void) | undefined> {
  // Through an async function, so that a listen that throws synchronously is a rejection too.
  const listening = (async () => listen(wake))();
  let timer: NodeJS.Timeout | undefined;
  let onAbort: (() => void) | undefined;
  const gaveUp = new Promise<undefined>((resolve) => {
    if (signal?.aborted) return resolve(undefined);
    onAbort = () => resolve(undefined);
    signal?.addEventListener('abort', onAbort, { once: true });
    const left = Math.max(0, Math.ceil(deadline - performance.now()));
    timer = setTimeout(onAbort, Math.min(left, MAX_TIMER_MS));
  });
  try {
    const unsubscribe = await Promise.race([listening.catch(() => undefined), gaveUp]);
    if (unsubscribe === undefined) {
      listening.then(
        (stop) => stop(),
        () => {},
      );
    }
    return unsubscribe;
  } finally {
    clearTimeout(timer);
    if (onAbort) signal?.removeEventListener('abort', onAbort);
  }
}
