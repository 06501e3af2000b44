import { MAX_TIMER_MS } from './long-timeout';
import { checkAtMost, checkNonNegativeInteger } from './option-checks';

/**
 * The default of every adapter's `stopTimeoutMs` (the SQS poller's, the RabbitMQ consumer's): how long
 * `stop()` waits for the messages in flight before it abandons them, in milliseconds. Under Kubernetes,
 * whose grace period between `SIGTERM` and `SIGKILL` is 30 s by default, an application sets it a few
 * seconds below `terminationGracePeriodSeconds`, so that `stop()` ends before the kill.
 */
export const DEFAULT_STOP_TIMEOUT_MS = 30_000;

/**
 * The least time an adapter's `stop()` gives its last broker requests once `stopTimeoutMs` is spent, in
 * milliseconds: the SQS poller's last deletes and visibility changes, the RabbitMQ consumer's channel and
 * connection closes. They get what is left of `stopTimeoutMs`, at least this.
 */
export const STOP_FINAL_STEP_MIN_MS = 1000;

/**
 * The `stopTimeoutMs` option, the same in every adapter: an integer from 0 to 2^31-1 (a Node timer's
 * longest delay), {@link DEFAULT_STOP_TIMEOUT_MS} when `undefined`.
 * @throws `InvalidOptionError` `stopTimeoutMs must be an integer >= 0, got <value>`, or `stopTimeoutMs
 *   must be at most 2147483647, got <value>`.
 */
export function checkStopTimeoutMs(value: unknown): number {
  return checkAtMost(
    'stopTimeoutMs',
    checkNonNegativeInteger('stopTimeoutMs', value, DEFAULT_STOP_TIMEOUT_MS),
    MAX_TIMER_MS,
  );
}
