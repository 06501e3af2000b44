import type { SignalSource } from '../runner/handler-context';

/**
 * The `signal` of one message's handler. It follows the runner's, which aborts when the claim is lost or
 * `handlerTimeoutMs` passes, and aborts too when `stop()` gives up on the message. Its `AbortController`
 * is made on the handler's first read only, and only then does it listen to `abandoning`.
 * {@link HandlerSignal.dispose} removes that listener once the run ended.
 */
export class HandlerSignal implements SignalSource {
  #run: SignalSource | undefined;
  #controller: AbortController | undefined;
  #onAbandon: (() => void) | undefined;

  constructor(private readonly abandoning: AbortSignal) {}

  /** Follows the runner's signal of the run `run` (its handler context); returns this source. */
  following(run: SignalSource): this {
    this.#run = run;
    return this;
  }

  /** Aborts when the runner's signal does, or when `stop()` abandons the delivery. */
  get signal(): AbortSignal {
    if (this.#controller) return this.#controller.signal;
    const controller = new AbortController();
    this.#controller = controller;
    const run = this.#run?.signal;
    if (run?.aborted) {
      controller.abort(run.reason);
    } else if (this.abandoning.aborted) {
      controller.abort(this.abandoning.reason);
    } else {
      run?.addEventListener('abort', () => controller.abort(run.reason), { once: true });
      const abandoning = this.abandoning;
      this.#onAbandon = () => controller.abort(abandoning.reason);
      abandoning.addEventListener('abort', this.#onAbandon, { once: true });
    }
    return controller.signal;
  }

  /** Stops listening to the consumer's abandonment (the run ended). */
  dispose(): void {
    if (this.#onAbandon) this.abandoning.removeEventListener('abort', this.#onAbandon);
    this.#onAbandon = undefined;
  }
}
