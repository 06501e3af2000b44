import { HandlerTimeoutError } from '../errors';
import type { UnprotectedResult } from '../runner/run-result';
import { LongTimeout } from './long-timeout';

/**
 * What an adapter's handler context holds at least: the core `HandlerContext` fields, with `key` possibly
 * `undefined` (a message without a key); the adapter adds the broker's message.
 */
export interface UnprotectedContextBase {
  readonly scope: string;
  readonly key: string | undefined;
  readonly fencingToken: number;
  readonly attempt: number;
  readonly outcome: 'ACQUIRED' | 'ACQUIRED_STALE' | 'UNPROTECTED';
  readonly signal: AbortSignal;
}

/** How {@link runUnprotected} bounds a run. */
export interface UnprotectedRunOptions {
  /**
   * Longest the handler may run, in milliseconds (0 or `undefined`: no limit). Past it the handler's
   * `signal` aborts with a `HandlerTimeoutError` and the run ends as `threw` with that error (the handler
   * may still be running: nothing holds a claim to say so).
   */
  readonly handlerTimeoutMs?: number;
  /** The store's error when the run is fail-open (`storeFailureMode: 'open'`), carried in the result. */
  readonly storeError?: unknown;
}

/**
 * Runs a handler without a claim (`outcome: 'UNPROTECTED'`: a message without a key under
 * `missingKey: 'process'`, or a store that does not answer under `storeFailureMode: 'open'`), the one way
 * every adapter does it. The handler's `signal` aborts when `stopping` aborts (the consumer stops; its
 * reason is passed on) or when `handlerTimeoutMs` passes. Never rejects: a throw (or the timeout) comes
 * back as a `threw` result, for the adapter's `decide` to bound its retries.
 * @param context - the handler's context without `signal` (`outcome: 'UNPROTECTED'`, fencing token 0).
 * @param stopping - aborted when the consumer stops; `undefined`: only the timeout aborts.
 */
export async function runUnprotected<T, C extends UnprotectedContextBase>(
  handler: (context: C) => Promise<T> | T,
  context: Omit<C, 'signal' | 'outcome'> & { readonly outcome: 'UNPROTECTED' },
  stopping: AbortSignal | undefined,
  options: UnprotectedRunOptions = {},
): Promise<UnprotectedResult<T>> {
  const { storeError } = options;
  try {
    const result = await callUnprotected(
      (signal) => handler({ ...context, signal } as C),
      stopping,
      options.handlerTimeoutMs ?? 0,
      context,
    );
    return { outcome: 'UNPROTECTED', status: 'completed', result, storeError };
  } catch (error) {
    return { outcome: 'UNPROTECTED', status: 'threw', error, storeError };
  }
}

/**
 * Calls `call` with a signal that aborts when `stopping` does, or after `handlerTimeoutMs` (then it
 * rejects with the `HandlerTimeoutError` it aborted with). For a handler that the runner calls unprotected
 * (`Idempotency.run` failing open), where the runner gives it a signal that never aborts.
 * @param where - the scope and key, for the timeout's message.
 */
export async function callUnprotected<T>(
  call: (signal: AbortSignal) => Promise<T> | T,
  stopping: AbortSignal | undefined,
  handlerTimeoutMs: number,
  where: { readonly scope: string; readonly key: string | undefined },
): Promise<T> {
  const controller = new AbortController();
  const onStop = () => controller.abort(stopping?.reason);
  if (stopping?.aborted) onStop();
  else stopping?.addEventListener('abort', onStop, { once: true });
  let timer: LongTimeout | undefined; // any length: a bare setTimeout fires a delay above 2^31 - 1 ms at once
  try {
    const running = (async () => call(controller.signal))();
    if (!(handlerTimeoutMs > 0)) return await running;
    return await Promise.race([
      running,
      new Promise<never>((_, reject) => {
        timer = new LongTimeout(() => {
          const timedOut = new HandlerTimeoutError(
            `The unprotected handler of ${where.scope}/${where.key ?? '(no key)'} ran longer than handlerTimeoutMs (${handlerTimeoutMs} ms)`,
          );
          controller.abort(timedOut);
          reject(timedOut);
        }, handlerTimeoutMs);
      }),
    ]);
  } finally {
    timer?.clear();
    stopping?.removeEventListener('abort', onStop);
  }
}
