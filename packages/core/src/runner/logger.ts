import type { EventEmitter } from 'node:events';
import { ReplicationTimeoutError, StoreUnavailableError } from '../errors';
import type { IdempotencyEvents } from './events';

/**
 * Where the runner reports what a person must not miss. Any object with `warn` and `error`, and optionally
 * `info` and `debug`, taking a message and a fields object. That fits `console`, winston and pino alike. The
 * message is complete on its own, with scope, key and numbers, and `fields` repeats them as structured data.
 * pino reads a leading object, so to keep the fields structured there pass
 * `{ warn: (m, f) => log.warn(f, m), error: (m, f) => log.error(f, m) }`.
 */
export interface IdempotencyLogger {
  warn(message: string, fields?: Record<string, unknown>): void;
  error(message: string, fields?: Record<string, unknown>): void;
  info?(message: string, fields?: Record<string, unknown>): void;
  debug?(message: string, fields?: Record<string, unknown>): void;
}

/** The default logger, `console.warn` and `console.error`. */
export const consoleLogger: IdempotencyLogger = {
  warn: (message, fields) => console.warn(message, fields ?? ''),
  error: (message, fields) => console.error(message, fields ?? ''),
};

const PREFIX = 'idempotent-consumer:';

/**
 * Subscribes `logger` to a runner's events and logs only what needs a person, never a line per message.
 * - `warn` for a lease lost, because another worker may run the key and this worker's writes are refused.
 * - `warn` for a result omitted because it exceeds `maxResultBytes`, since duplicates replay `undefined`.
 * - `warn` once when the store becomes unavailable, at the first `StoreUnavailableError`. Runs then fail
 *   closed, or run unprotected with `storeFailureMode: 'open'`. `info`, else `warn`, once when it answers a
 *   claim again, with the outage's length and number of failed calls.
 * - `warn` for a write its replicas did not acknowledge in time, a `ReplicationTimeoutError`.
 * - `error` for any other store error, such as an unexpected reply, and for an `onHeartbeat` hook that threw.
 *
 * Nothing is logged when the caller's own request is refused, such as a scope, key, option or payload the
 * store does not take. The runner emits no `storeError` for it. The call rejects with `InvalidKeyError`,
 * `InvalidOptionError` or `InvalidPayloadError`, and the caller decides, see `isCallerError` in
 * runner/idempotency.ts.
 *
 * @returns a function that unsubscribes.
 */
export function attachLogger(runner: EventEmitter<IdempotencyEvents>, logger: IdempotencyLogger): () => void {
  let outage: { sinceMs: number; failures: number } | undefined;
  const info = (message: string, fields: Record<string, unknown>) =>
    logger.info ? logger.info(message, fields) : logger.warn(message, fields);

  const onRecovered = () => {
    if (!outage) return;
    const fields = { downForMs: Date.now() - outage.sinceMs, failedCalls: outage.failures };
    outage = undefined;
    runner.off('outcome', onRecovered);
    info(
      `${PREFIX} the idempotency store answers again after ${fields.downForMs} ms (${fields.failedCalls} failed calls)`,
      fields,
    );
  };
  const listeners: { [K in keyof IdempotencyEvents]?: (...args: IdempotencyEvents[K]) => void } = {
    leaseLost: (e) =>
      logger.warn(
        `${PREFIX} lease lost on key ${JSON.stringify(e.key)} of scope ${JSON.stringify(e.scope)} (fencing token ${e.fencingToken}, during ${e.during}): another worker may run it, and this worker's writes are refused`,
        { ...e },
      ),
    resultOmitted: (e) =>
      logger.warn(
        `${PREFIX} the result of key ${JSON.stringify(e.key)} of scope ${JSON.stringify(e.scope)} is ${e.bytes} bytes, above maxResultBytes ${e.maxResultBytes}: stored without it, duplicates replay undefined`,
        { ...e },
      ),
    storeError: (e) => {
      if (e.error instanceof StoreUnavailableError) {
        if (outage) {
          outage.failures++;
          return;
        }
        outage = { sinceMs: Date.now(), failures: 1 };
        runner.on('outcome', onRecovered);
        logger.warn(
          `${PREFIX} the idempotency store is unavailable (${e.operation}: ${e.error.message}); nothing is acknowledged until it answers, unless storeFailureMode is 'open'`,
          { operation: e.operation, error: e.error, ...e.subject },
        );
        return;
      }
      // A write its replicas did not acknowledge in time is documented and retryable, so it is a warning.
      // Anything else is not an outage but an unexpected reply, a bug or version skew.
      const log = e.error instanceof ReplicationTimeoutError ? logger.warn : logger.error;
      log.call(logger, `${PREFIX} ${e.operation} failed: ${describe(e.error)}`, {
        operation: e.operation,
        error: e.error,
        ...e.subject,
      });
    },
  };
  for (const [name, listener] of Object.entries(listeners))
    runner.on(name as 'storeError', listener as never);
  return () => {
    for (const [name, listener] of Object.entries(listeners))
      runner.off(name as 'storeError', listener as never);
    runner.off('outcome', onRecovered);
  };
}

function describe(error: unknown): string {
  return error instanceof Error ? `${error.name}: ${error.message}` : String(error);
}
