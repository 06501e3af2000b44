import type { SignalSource } from '@idempotent-consumer/core/kit';

/**
 * The `signal` of one delivery's handler: it follows the runner's (aborted when the claim is lost or the
 * handler ran longer than `handlerTimeoutMs`), and aborts too when `stop()` abandons the delivery
 * (`stopTimeoutMs` ran out while it was in flight), with the reason of `abandoning`. Like the runner's,
 * its `AbortController` is made on the handler's first read only, and only then does it listen to
 * `abandoning` (the consumer's, which lives as long as the consumer): {@link HandlerSignal.dispose}, once
 * the run ended, removes that listener, so handlers that read their signal leave none behind.
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
