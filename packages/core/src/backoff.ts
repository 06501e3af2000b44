/** How a retry delay grows with the attempt number. */
export interface BackoffOptions {
  /** Delay before the first retry, in milliseconds. @defaultValue 1000 */
  baseMs?: number;
  /** Upper bound of any delay, in milliseconds. @defaultValue 60000 */
  maxMs?: number;
  /** Growth factor per attempt. @defaultValue 2 */
  factor?: number;
  /**
   * `full` picks a uniformly random delay between delay/2 and delay, so that many consumers retrying together
   * spread out. `none` keeps the exact delay. @defaultValue `'full'`
   */
  jitter?: 'full' | 'none';
}

/**
 * Delay before retry number `attempt`, 1 for the first retry. It is `min(maxMs, baseMs * factor^(attempt-1))`
 * with jitter. The adapters turn it into a broker delay, such as a RabbitMQ retry-tier TTL, an SQS visibility
 * timeout or a Kafka partition pause.
 *
 * @param attempt - the attempt that failed, an integer >= 1. Smaller values count as 1.
 * @param random - source of randomness between 0 and 1, injectable for tests.
 * @returns milliseconds, an integer >= 0.
 */
export function computeBackoffMs(
  attempt: number,
  options: BackoffOptions = {},
  random = Math.random,
): number {
  const base = options.baseMs ?? 1000;
  const max = options.maxMs ?? 60_000;
  const factor = options.factor ?? 2;
  const n = Math.max(1, Math.floor(attempt));
  const delay = Math.min(max, base * factor ** (n - 1));
  if (options.jitter === 'none') return Math.round(delay);
  return Math.round(delay / 2 + (random() * delay) / 2);
}
