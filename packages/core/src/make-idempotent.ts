import { AsyncLocalStorage } from 'node:async_hooks';
import { IdempotencyConflictError, LeaseLostError, PayloadMismatchError, RecordFailedError } from './errors';
import type { Payload } from './fingerprint';
import type { HandlerContext } from './runner/handler-context';
import type { Idempotency, RunOptions } from './runner/idempotency';
import type { RunResult } from './runner/run-result';

/** Options of {@link makeIdempotent}; `Args` are the wrapped function's parameters. */
export interface MakeIdempotentOptions<Args extends unknown[]> {
  /** The runner (and through it the store and its options: `leaseMs`, `maxAttempts`, `retentionMs`...). */
  readonly idempotency: Idempotency;
  /** The scope of every key of this function, for example `'charge-card'`. Non-empty. */
  readonly scope: string;
  /**
   * Derives the idempotency key from the call's arguments, for example `(order) => order.id`. Called once
   * per call; what it throws rejects the call. An empty or non-string key rejects with `InvalidKeyError`.
   */
  readonly key: (...args: Args) => string;
  /**
   * Derives the payload to fingerprint (SHA-256 of its canonical JSON), so that the same key called with
   * other arguments rejects with {@link PayloadMismatchError} instead of replaying a result that belongs to
   * other arguments (Powertools' payload validation). Omitted: nothing is compared.
   */
  readonly payload?: (...args: Args) => Payload;
  /** Per-call overrides of the runner's `leaseMs` and `maxAttempts`, and the `onHeartbeat` hook. */
  readonly runOptions?: RunOptions;
}

/**
 * A function wrapped by {@link makeIdempotent}: called like the original (same parameters, a promise of the
 * same result), plus `run` for callers that want the outcome rather than exceptions.
 */
export interface IdempotentFunction<Args extends unknown[], R> {
  /**
   * Runs the function at most once per idempotency key and resolves with its result, or with the stored
   * result of an earlier call with the same key (`DUPLICATE`). Rejects with what the function threw (the
   * record was released for a retry, or failed when the error is non-retryable or attempts are exhausted),
   * {@link IdempotencyConflictError}, {@link PayloadMismatchError}, {@link RecordFailedError},
   * `LeaseLostError` (the claim was lost while the function ran, or before it started, which its message
   * says; nothing was recorded), or what
   * {@link Idempotency.run} rejects with (`StoreUnavailableError`, `InvalidKeyError`...).
   */
  (...args: Args): Promise<Awaited<R>>;
  /** The same call, resolving with the runner's full {@link RunResult} (outcome, fencing token, attempt). */
  run(...args: Args): Promise<RunResult<Awaited<R>>>;
}

const currentContext = new AsyncLocalStorage<HandlerContext>();

/**
 * The claim the current call of a {@link makeIdempotent} function runs under (fencing token, attempt,
 * abort signal), from anywhere inside that call; `undefined` outside one. Pass its `fencingToken` to
 * downstream writes so that a stalled call is fenced off.
 */
export function getIdempotencyContext(): HandlerContext | undefined {
  return currentContext.getStore();
}

/**
 * Makes any async (or sync) function idempotent, as AWS Lambda Powertools' `makeIdempotent` does: each call
 * derives an idempotency key from its arguments and goes through {@link Idempotency.run}, so the function
 * body runs at most once per key (on a live lease, fenced by a token) and later calls with the same key get
 * the stored result back. The wrapper keeps the function's parameter types; its result becomes a promise.
 *
 * What a caller sees, per outcome (`.run()` returns the outcome itself instead):
 * - `ACQUIRED`/`ACQUIRED_STALE`, the function returned: its result (also when the store could not record
 *   it, `recorded: false`); it threw: the same error, after the record was released or failed;
 * - `DUPLICATE`: the stored result (`undefined` when none was stored: the function returned `undefined` or
 *   the result exceeded `maxResultBytes` with `onResultTooLarge: 'omit'`);
 * - `CONFLICT`: {@link IdempotencyConflictError} with `retryAfterMs`; `PAYLOAD_MISMATCH`:
 *   {@link PayloadMismatchError}; `FAILED`: {@link RecordFailedError};
 * - lease lost while it ran, or before it started (the extension before it was refused; it did not run):
 *   `LeaseLostError` (its `cause` is the function's error, if it threw);
 * - `UNPROTECTED` (`storeFailureMode: 'open'`, store down): the function's own result or error.
 *
 * `this` is passed through to the function. Inside it, {@link getIdempotencyContext} gives the claim.
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

/** The value (or the error) a plain call of a {@link makeIdempotent} function ends with. */
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
