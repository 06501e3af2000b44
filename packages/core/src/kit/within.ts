/**
 * Waits for `work`, at most `ms` milliseconds: `'timeout'` when the time ran out first. `work` is not
 * cancelled: it goes on, and a rejection after the timeout is handled here (never an unhandled rejection).
 * The timer is cleared once either side settles. For a consumer's `stop()`, bounded by `stopTimeoutMs`
 * ({@link checkStopTimeoutMs}), which must not wait for ever for a broker that does not answer.
 * @param ms - milliseconds, at most 2^31-1 (a longer Node timer fires after 1 ms).
 * @throws `work`'s error, when it rejected first.
 */
export async function within<T>(work: Promise<T>, ms: number): Promise<T | 'timeout'> {
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<'timeout'>((resolve) => {
    timer = setTimeout(() => resolve('timeout'), ms);
  });
  try {
    return await Promise.race([work, timedOut]);
  } finally {
    clearTimeout(timer);
  }
}
