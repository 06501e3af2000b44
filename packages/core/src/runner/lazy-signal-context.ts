import type { HandlerContext } from './idempotency';

/** Whatever owns a run's signal: the run's lease keeper, or the context an adapter extends. */
export interface SignalSource {
  readonly signal: AbortSignal;
}

/**
 * The {@link HandlerContext} a handler receives: its fields are own properties, and `signal` is a getter on
 * the prototype that asks its source (the lease keeper) for the signal, whose `AbortController` is then
 * made on first read only (one per message otherwise, bench/README.md).
 *
 * A class rather than an object literal with a getter: V8 builds such a literal on a slow path and
 * allocates it where only a full garbage collection frees it, which cost about 3 µs of CPU per message
 * (bench/README.md, "Session 7"). Being on the prototype, `signal` is not copied by a spread
 * (`{ ...context }`): pass it on explicitly, or use `extendHandlerContext` (`@idempotent-consumer/core/kit`).
 */
export class LazySignalContext implements HandlerContext {
  readonly #source: SignalSource;

  constructor(
    readonly scope: string,
    readonly key: string,
    readonly fencingToken: number,
    readonly attempt: number,
    readonly outcome: HandlerContext['outcome'],
    source: SignalSource,
  ) {
    this.#source = source;
  }

  /** Aborts with a `LeaseLostError` when the claim is lost (made on first read). */
  get signal(): AbortSignal {
    return this.#source.signal;
  }
}
