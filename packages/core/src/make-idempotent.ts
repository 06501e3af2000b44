import { AsyncLocalStorage } from 'node:async_hooks';
import { IdempotencyConflictError, LeaseLostError, PayloadMismatchError, RecordFailedError } from './errors';
import type { Payload } from './fingerprint';
import type { HandlerContext } from './runner/handler-context';
import type { Idempotency, RunOptions } from './runner/idempotency';
import type { RunResult } from './runner/run-result';

/** Options of {@link makeIdempotent}. `Args` are the wrapped function's parameters. */
export interface MakeIdempotentOptions<Args extends unknown[]> {
  /** The runner, and through it the store and options such as `leaseMs`, `maxAttempts` and `retentionMs`. */
  readonly idempotency: Idempotency;
  /** The scope of every key of this function, for example `'charge-card'`. Non-empty. */
  readonly scope: string;
  /**
   * Derives the idempotency key from the call's arguments, for example `(order) => order.id`. Called once per
   * call, and what it throws rejects the call. An empty or non-string key rejects with `InvalidKeyError`.
   */
  readonly key: (...args: Args) => string;
  /**
   * Derives the payload to fingerprint, the SHA-256 of its canonical JSON. The same key called with other
   * arguments then rejects with {@link PayloadMismatchError} instead of replaying a result that belongs to
   * other arguments, as Powertools' payload validation does. When omitted, nothing is compared.
   */
  readonly payload?: (...args: Args) => Payload;
  /** Per-call overrides of the runner's `leaseMs` and `maxAttempts`, and the `onHeartbeat` hook. */
  readonly runOptions?: RunOptions;
}

/**
 * A function wrapped by {@link makeIdempotent}. It is called like the original, with the same parameters and
 * a promise of the same result, and adds `run` for callers that want the outcome rather than exceptions.
 */
export interface IdempotentFunction<Args extends unknown[], R> {
  /**
   * Runs the function at most once per idempotency key. It resolves with the function's result, or with the
   * stored result of an earlier call with the same key, a `DUPLICATE`. It rejects with what the function
   * threw, after the record was released for a retry or failed. It also rejects with
   * {@link IdempotencyConflictError}, {@link PayloadMismatchError}, {@link RecordFailedError}, a
   * `LeaseLostError` when the claim was lost and nothing was recorded, or what {@link Idempotency.run}
   * rejects with, such as `StoreUnavailableError` or `InvalidKeyError`.
   */
  (...args: Args): Promise<Awaited<R>>;
  /** The same call, resolving with the runner's full {@link RunResult}: outcome, fencing token, attempt. */
  run(...args: Args): Promise<RunResult<Awaited<R>>>;
}

const currentContext = new AsyncLocalStorage<HandlerContext>();

/**
 * The claim the current call of a {@link makeIdempotent} function runs under, with its fencing token, attempt
 * and abort signal, from anywhere inside that call. `undefined` outside one. Pass its `fencingToken` to
 * downstream writes so that a stalled call is fenced off.
 */
export function getIdempotencyContext(): HandlerContext | undefined {
  return currentContext.getStore();
}

/**
 * Makes any function idempotent, as Powertools' `makeIdempotent` does. Each call derives an idempotency key
 * from its arguments and goes through {@link Idempotency.run}, so the body runs at most once per key and
 * later calls with the same key get the stored result back. Parameter types are kept, the result becomes a
 * promise, and `this` is passed through. Inside, {@link getIdempotencyContext} gives the claim.
 *
 * What a plain call ends with, per outcome. `.run()` returns the outcome itself instead.
 * - `ACQUIRED` or `ACQUIRED_STALE`. The function's result, even when the store could not record it, or the
 *   error it threw after the record was released or failed.
 * - `DUPLICATE`. The stored result, or `undefined` when none was stored.
 * - `CONFLICT`, `PAYLOAD_MISMATCH` and `FAILED`. {@link IdempotencyConflictError} with `retryAfterMs`,
 *   {@link PayloadMismatchError} and {@link RecordFailedError}.
 * - A lease lost before or while the function ran. `LeaseLostError`, whose `cause` is its error if any.
 * - `UNPROTECTED`, with `storeFailureMode: 'open'` and the store down. The function's own result or error.
 *
 * @example
 * ```ts
 * const charge = makeIdempotent(async (order: Order) => payments.charge(order), {
 *   idempotency, scope: 'charge', key: (order) => order.id, payload: (order) => order,
 * });
 * await charge(order);              // runs once
 * await charge(order);              // resolves with the stored result, does not charge again
 * const r = await charge.run(order); // r.outcome === 'DUPLICATE'
 * ```
 */
export function makeIdempotent<F extends (...args: never[]) => unknown>(
  fn: F,
  options: MakeIdempotentOptions<Parameters<F>>,
): IdempotentFunction<Parameters<F>, ReturnType<F>> {
  type Args = Parameters<F>;
  type R = ReturnType<F>;
  const { idempotency, scope, key, payload, runOptions } = options;

  async function run(this: unknown, ...args: Args): Promise<RunResult<Awaited<R>>> {
    const request = { scope, key: key(...args), ...(payload && { payload: payload(...args) }) };
    return idempotency.run<Awaited<R>>(
      request,
      (context) =>
        currentContext.run(context, () => Promise.resolve(fn.apply(this, args)) as Promise<Awaited<R>>),
      runOptions,
    );
  }

  async function call(this: unknown, ...args: Args): Promise<Awaited<R>> {
    return unwrap(await run.apply(this, args), scope);
  }
  return Object.assign(call, { run });
}

/** The value or error that a plain call of a {@link makeIdempotent} function ends with. */
function unwrap<T>(result: RunResult<T>, scope: string): T {
  switch (result.outcome) {
    case 'DUPLICATE':
      return result.result as T;
    case 'CONFLICT':
      throw new IdempotencyConflictError(
        `Another call holds the claim on this idempotency key in scope '${scope}'; try again in ${result.retryAfterMs} ms`,
        { retryAfterMs: result.retryAfterMs },
      );
    case 'PAYLOAD_MISMATCH':
      throw new PayloadMismatchError(
        `This idempotency key in scope '${scope}' was first used with another payload (record ${result.state})`,
      );
    case 'FAILED':
      throw new RecordFailedError(
        `This idempotency key in scope '${scope}' failed earlier and is not run again: ${result.error}`,
        { recordedError: result.error },
      );
    default:
      break;
  }
  switch (result.status) {
    case 'completed':
      return result.result;
    case 'lease-lost':
      throw new LeaseLostError(
        `The claim on this idempotency key in scope '${scope}' was lost ${result.handlerStarted ? 'while the function ran' : 'before the function started (it did not run)'} (fencing token ${result.fencingToken}); nothing was recorded`,
        result.error === undefined ? undefined : { cause: result.error },
      );
    default:
      throw result.error;
  }
}
