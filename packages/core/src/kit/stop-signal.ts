import { setMaxListeners } from 'node:events';
import { sleep } from './sleep';
import { STOP_FINAL_STEP_MIN_MS } from './stop-timeout';
import { type UnlessAborted, unlessAborted } from './unless-aborted';
import { within } from './within';

/**
 * A consumer's stop switch: one `AbortSignal` that every wait of the consumer listens to (no listener
 * limit), and the waits a `stop()` bounded by `stopTimeoutMs` is made of.
 */
export class StopSignal {
  /** The least time the last step of a `stop()` gets (closing channels, the last deletes), in milliseconds. */
  static readonly FINAL_STEP_MIN_MS = STOP_FINAL_STEP_MIN_MS;
  readonly #controller = new AbortController();

  constructor() {
    try {
      setMaxListeners(0, this.#controller.signal);
    } catch {
      // An AbortController of another realm (a test runner's VM context): only the warning is at stake.
    }
  }

  /** Aborts when {@link StopSignal.abort} is called. */
  get signal(): AbortSignal {
    return this.#controller.signal;
  }

  /** Stops: every wait on the signal ends. */
  abort(reason?: unknown): void {
    this.#controller.abort(reason);
  }

  /** Waits `ms` milliseconds: `true` when they passed, `false` when `signal` aborted first. Never rejects. */
  static sleep(ms: number, signal?: AbortSignal): Promise<boolean> {
    return sleep(ms, signal);
  }

  /** Waits for `promise`, or until `signal` aborts (`{ aborted: true }`): for a call that may never answer. */
  static unless<T>(promise: Promise<T>, signal: AbortSignal): Promise<UnlessAborted<T>> {
    return unlessAborted(promise, signal);
  }

  /** Waits for `work` at most `ms` milliseconds: its value, or `'timeout'`. */
  static within<T>(work: Promise<T>, ms: number): Promise<T | 'timeout'> {
    return within(work, ms);
  }
}
