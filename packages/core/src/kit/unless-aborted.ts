/** How {@link unlessAborted} ended: `promise`'s value, or the signal's abort first. */
export type UnlessAborted<T> = { readonly aborted: false; readonly value: T } | { readonly aborted: true };

/**
 * Waits for `promise` unless `signal` aborts first (also when it has aborted already), for a consumer's
 * stop that must not wait for a call the other side may never answer (a broker's produce, a connect). The
 * call is not cancelled: after an abort it is left to end on its own, and its later rejection is handled
 * here (never an unhandled rejection); the abort listener is removed when `promise` settles.
 *
 * @returns `{ aborted: false, value }` when `promise` resolved first; `{ aborted: true }` when `signal`
 *   aborted first.
 * @throws `promise`'s error, when it rejected before the abort.
 */
export function unlessAborted<T>(promise: Promise<T>, signal: AbortSignal): Promise<UnlessAborted<T>> {
  return new Promise((resolve, reject) => {
    const onAbort = () => resolve({ aborted: true });
    if (signal.aborted) onAbort();
    else signal.addEventListener('abort', onAbort, { once: true });
    void promise
      .then((value) => resolve({ aborted: false, value }), reject)
      .finally(() => signal.removeEventListener('abort', onAbort));
  });
}
