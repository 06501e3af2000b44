import type { EventEmitter } from 'node:events';

/**
 * Calls `report` (a user's callback or listener) and drops whatever it throws: a reporting bug must not
 * change what the caller does next (keep a gate closed, let leases lapse, turn an ack into a redelivery).
 * @internal
 */
export function callIsolated(report: () => void): void {
  try {
    report();
  } catch {
    // Isolated by design; see above.
  }
}

/**
 * Calls every listener of `name` on `emitter` with `args`, each isolated: one that throws, or returns a
 * promise that rejects (an `async` listener), neither stops the others nor reaches the caller, and the
 * rejection is handled (Node's own `emit` leaves it unhandled, which ends the process on Node >= 15).
 * `onListenerError` receives what it threw or rejected with; what it throws is dropped.
 * @returns whether `name` had listeners.
 * @internal
 */
export function emitIsolated(
  emitter: EventEmitter,
  name: string | symbol,
  args: readonly unknown[],
  onListenerError?: (error: unknown, name: string | symbol) => void,
): boolean {
  if (emitter.listenerCount(name) === 0) return false; // before copying the listener array
  const failed = (error: unknown) => callIsolated(() => onListenerError?.(error, name));
  for (const listener of emitter.rawListeners(name) as ((...a: unknown[]) => unknown)[]) {
    try {
      const returned = listener.apply(emitter, args as unknown[]);
      if (isThenable(returned)) returned.then(undefined, failed);
    } catch (error) {
      failed(error);
    }
  }
  return true;
}

function isThenable(value: unknown): value is PromiseLike<unknown> {
  return (
    value !== null &&
    (typeof value === 'object' || typeof value === 'function') &&
    typeof (value as { then?: unknown }).then === 'function'
  );
}
