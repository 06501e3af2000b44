import type { HandlerContext } from '../runner/idempotency';

/**
 * The runner's {@link HandlerContext} with an adapter's own fields added (the message, its topic, …), for
 * the adapter's handler. Use it instead of `{ ...context, message }`: a spread reads `signal`, and the
 * runner creates the signal's `AbortController` only when a handler reads it (one per message otherwise,
 * which showed in the adapters' profiles: bench/README.md). `signal` stays a getter on the result; an
 * `extra` field of the same name as a context field replaces it.
 *
 * @example
 * ```ts
 * idempotency.run(request, (context) => handler(extendHandlerContext(context, { message })));
 * ```
 */
export function extendHandlerContext<E extends object>(
  context: HandlerContext,
  extra: E,
): Omit<HandlerContext, keyof E> & E {
  return Object.assign(
    {
      scope: context.scope,
      key: context.key,
      fencingToken: context.fencingToken,
      attempt: context.attempt,
      outcome: context.outcome,
      get signal() {
        return context.signal;
      },
    },
    extra,
  ) as Omit<HandlerContext, keyof E> & E;
}
