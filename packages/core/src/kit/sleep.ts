import { MAX_TIMER_MS } from './long-timeout';

/**
 * Waits `ms` milliseconds, or less when `signal` aborts: an abort resolves the wait early instead of
 * rejecting it, so a loop that sleeps between tries ends with `if (!(await sleep(ms, signal))) return;`
 * and no try/catch. The timer is unref'd (a pending sleep does not keep the process alive), and the abort
 * listener is removed when the timer fires, so many sleeps on one long-lived signal do not accumulate
 * listeners.
 *
 * @param ms - milliseconds; a negative, `NaN` or fractional value counts as `max(0, ms)` rounded by the
 *   timer, a value above 2^31-1 as 2^31-1.
 * @param signal - ends the wait early when it aborts (also when it has aborted already).
 * @returns `true` when the whole delay passed, `false` when `signal` ended it. Never rejects.
 */
export function sleep(ms: number, signal?: AbortSignal): Promise<boolean> {
  if (signal?.aborted) return Promise.resolve(false);
  const delayMs = Math.min(MAX_TIMER_MS, Math.max(0, Number.isNaN(ms) ? 0 : ms));
  return new Promise((resolve) => {
    const onAbort = () => {
      clearTimeout(timer);
      resolve(false);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve(true);
    }, delayMs);
    timer.unref();
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
