import { performance } from 'node:perf_hooks';

/**
 * Runs `body` on Jest's fake timers, with `performance.now` (the runner's local clock) following them as
 * `Date.now` does (the in-memory store's clock, for a store created inside `body`): leases, heartbeats and
 * sleeps then happen exactly when due, however late a busy machine would run real timers. Advance time
 * with `jest.advanceTimersByTimeAsync`. Real timers and the real `performance.now` are back afterwards,
 * also when `body` throws.
 */
export async function onFakeClock(body: () => Promise<void>): Promise<void> {
  jest.useFakeTimers();
  const now = jest.spyOn(performance, 'now').mockImplementation(() => Date.now());
  try {
    await body();
  } finally {
    now.mockRestore();
    jest.useRealTimers();
  }
}
