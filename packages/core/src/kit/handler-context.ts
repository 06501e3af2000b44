import { type HandlerContext, LazySignalContext } from '../runner/handler-context';

/**
 * The runner's {@link HandlerContext} with an adapter's own fields added (the message, its topic, …), for
 * the adapter's handler. Use it instead of `{ ...context, message }`: `signal` is a getter on the runner's
 * context, which a spread does not copy, and the runner creates the signal's `AbortController` only when a
 * handler reads it (one per message otherwise, which showed in the adapters' profiles: bench/README.md).
 * `signal` stays a getter on the result (a {@link LazySignalContext} reading the runner's context); an
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
  const extended = new LazySignalContext(
    context.scope,
    context.key,
    context.fencingToken,
    context.attempt,
    context.outcome,
    context,
  );
  // An own `signal` in `extra` shadows the prototype's getter (which has no setter to assign through).
  if (Object.hasOwn(extra, 'signal')) {
    Object.defineProperty(extended, 'signal', {
      value: (extra as { signal: unknown }).signal,
      enumerable: true,
      writable: true,
      configurable: true,
    });
  }
  return Object.assign(extended, extra) as unknown as Omit<HandlerContext, keyof E> & E;
}
