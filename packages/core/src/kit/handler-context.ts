import { type HandlerContext, LazySignalContext, type SignalSource } from '../runner/handler-context';

/**
 * The runner's {@link HandlerContext} with an adapter's own fields added (the message, its topic, …), for
 * the adapter's handler. Use it instead of `{ ...context, message }`: `signal` is a getter on the runner's
 * context, which a spread does not copy, and the runner creates the signal's `AbortController` only when a
 * handler reads it (one per message otherwise, which showed in the adapters' profiles: bench/README.md).
 * `signal` stays a getter on the result (a {@link LazySignalContext} reading the runner's context, or
 * `signalSource`); an `extra` field of the same name as a context field replaces it.
 *
 * @param signalSource - where the handler's `signal` is read from, on its first read: an adapter's own
 *   source that follows the runner's signal and aborts for a reason of its own too (the RabbitMQ
 *   consumer's `stop()` abandoning the delivery). @defaultValue `context` (the runner's signal)
 * @example
 * ```ts
 * idempotency.run(request, (context) => handler(extendHandlerContext(context, { message })));
 * ```
 */
export function extendHandlerContext<E extends object>(
  context: HandlerContext,
  extra: E,
  signalSource: SignalSource = context,
): Omit<HandlerContext, keyof E> & E {
  const extended = new LazySignalContext(
    context.scope,
    context.key,
    context.fencingToken,
    context.attempt,
    context.outcome,
    signalSource,
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
