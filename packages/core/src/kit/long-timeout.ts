/**
 * The longest delay a Node timer holds: 2^31 - 1 ms, about 24.8 days. Node fires a timer with a longer
 * delay after 1 ms (with a `TimeoutOverflowWarning`), so every delay a user can set that long goes through
 * {@link LongTimeout} or is clamped to this.
 */
export const MAX_TIMER_MS = 2 ** 31 - 1;

/**
 * A `setTimeout` for a delay of any length: a delay above {@link MAX_TIMER_MS} is waited as a chain of
 * timers of at most that long, so `handlerTimeoutMs: 2 ** 31` (or `Number.MAX_SAFE_INTEGER`, meant as
 * "practically none") fires when it says, not after 1 ms. A delay within a Node timer's range is one plain
 * timer, exactly as `setTimeout`.
 */
export class LongTimeout {
  #timer: NodeJS.Timeout | undefined;
  readonly #unref: boolean;

  /**
   * Arms the timer.
   * @param callback - called once, when `delayMs` milliseconds have passed (unless cleared before).
   * @param delayMs - milliseconds, as `setTimeout` takes them (any length).
   * @param options.unref - whether the timer may let the process exit (`timer.unref()`). @defaultValue false
   */
  constructor(callback: () => void, delayMs: number, options: { readonly unref?: boolean } = {}) {
    this.#unref = options.unref === true;
    this.#arm(callback, delayMs);
  }

  /** Cancels the timer; the callback is not called. */
  clear(): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
  }

  #arm(callback: () => void, delayMs: number): void {
    this.#timer =
      delayMs > MAX_TIMER_MS
        ? setTimeout(() => this.#arm(callback, delayMs - MAX_TIMER_MS), MAX_TIMER_MS)
        : setTimeout(callback, delayMs);
    if (this.#unref) this.#timer.unref();
  }
}
