import { EventEmitter } from 'node:events';
import { callIsolated, emitIsolated } from './isolate';

/**
 * An event map: each event name with the tuple of arguments its listeners receive, as in Node's
 * `EventEmitter<T>` (for example `{ settled: [SettledEvent]; stopped: [] }`).
 */
export type EventMap<T> = { [K in keyof T]: unknown[] };

/** The event names of an event map (its string and symbol keys). */
export type EventName<Events> = keyof Events & (string | symbol);

/** A listener of event `K` of an event map: it receives the event's arguments; what it returns is ignored. */
export type TypedListener<Events extends EventMap<Events>, K extends EventName<Events>> = (
  ...args: Events[K]
) => unknown;

/** Options of a {@link TypedEventEmitter}. */
export interface TypedEventEmitterOptions {
  /**
   * Called when a listener throws or returns a promise that rejects, with the event's name; for logging.
   * Whatever it does (it may throw too) does not reach the code that emitted. @defaultValue none: the
   * error is dropped
   */
  readonly onListenerError?: (error: unknown, eventName: string | symbol) => void;
}

/**
 * A typed `EventEmitter` for adapters, whose events are reports and never part of a decision:
 *
 * - `emit` calls every listener, each isolated: a listener that throws (or returns a promise that
 *   rejects) does not stop the other listeners and never reaches the emitting code, so a listener's bug
 *   cannot turn an ack into a redelivery (see {@link TypedEventEmitterOptions.onListenerError});
 * - `error` is an event like any other: emitting it without a listener does not throw (Node's
 *   `EventEmitter` throws then, which would make a report crash a consumer);
 * - {@link TypedEventEmitter.hasListeners} and {@link TypedEventEmitter.emitLazy} skip building a payload
 *   nobody listens to (one check per message on the hot path).
 *
 * `on`, `once`, `off`, `prependListener` and the other methods are Node's, typed by the event map (the
 * class extends Node's untyped `EventEmitter`, so its declarations do not depend on the `@types/node`
 * version). Modelled on the runner's
 * own `emit` (`Idempotency` events) and sqs-consumer's `src/emitter.ts` (one typed emitter per consumer).
 *
 * @typeParam Events - the event map, for example `{ settled: [SettledEvent]; stopped: [] }`.
 *
 * @example
 * ```ts
 * interface ConsumerEvents { settled: [{ key: string; action: 'ack' | 'retry' }]; stopped: [] }
 * class Consumer extends TypedEventEmitter<ConsumerEvents> {
 *   #settle(key: string) {
 *     this.emitLazy('settled', () => ({ key, action: 'ack' }));
 *   }
 * }
 * ```
 */
export class TypedEventEmitter<Events extends EventMap<Events>> extends EventEmitter {
  readonly #onListenerError: ((error: unknown, eventName: string | symbol) => void) | undefined;

  constructor(options: TypedEventEmitterOptions = {}) {
    super({ captureRejections: false });
    this.#onListenerError = options.onListenerError;
  }

  /** Adds `listener` for `name` (Node's `on`). */
  override on<K extends EventName<Events>>(name: K, listener: TypedListener<Events, K>): this {
    return super.on(name, listener as (...args: unknown[]) => void);
  }

  /** Adds `listener` for `name` (Node's `addListener`, the same as `on`). */
  override addListener<K extends EventName<Events>>(name: K, listener: TypedListener<Events, K>): this {
    return super.addListener(name, listener as (...args: unknown[]) => void);
  }

  /** Adds `listener` for the next `name` only (Node's `once`). */
  override once<K extends EventName<Events>>(name: K, listener: TypedListener<Events, K>): this {
    return super.once(name, listener as (...args: unknown[]) => void);
  }

  /** Adds `listener` for `name` before the others (Node's `prependListener`). */
  override prependListener<K extends EventName<Events>>(name: K, listener: TypedListener<Events, K>): this {
    return super.prependListener(name, listener as (...args: unknown[]) => void);
  }

  /** Adds `listener` for the next `name` only, before the others (Node's `prependOnceListener`). */
  override prependOnceListener<K extends EventName<Events>>(
    name: K,
    listener: TypedListener<Events, K>,
  ): this {
    return super.prependOnceListener(name, listener as (...args: unknown[]) => void);
  }

  /** Removes `listener` from `name` (Node's `off`). */
  override off<K extends EventName<Events>>(name: K, listener: TypedListener<Events, K>): this {
    return super.off(name, listener as (...args: unknown[]) => void);
  }

  /** Removes `listener` from `name` (Node's `removeListener`, the same as `off`). */
  override removeListener<K extends EventName<Events>>(name: K, listener: TypedListener<Events, K>): this {
    return super.removeListener(name, listener as (...args: unknown[]) => void);
  }

  /** Whether `name` has at least one listener: check it before building a costly payload. */
  hasListeners(name: EventName<Events>): boolean {
    return this.listenerCount(name) > 0;
  }

  /**
   * Calls every listener of `name` with `args`, each isolated (see the class description).
   * @returns whether the event had listeners. Never throws.
   */
  override emit<K extends EventName<Events>>(name: K, ...args: Events[K]): boolean;
  override emit(name: string | symbol, ...args: unknown[]): boolean {
    return emitIsolated(this, name, args, this.#onListenerError);
  }

  /**
   * Emits an event with one payload, built by `payload` only when `name` has listeners.
   * @returns whether the event had listeners. Never throws, also when `payload` throws (reported to
   *   `onListenerError`).
   */
  emitLazy<K extends EventName<Events>>(
    name: K,
    payload: () => Events[K] extends [infer P] ? P : never,
  ): boolean {
    if (this.listenerCount(name) === 0) return false;
    let built: unknown;
    try {
      built = payload();
    } catch (error) {
      this.#listenerFailed(error, name);
      return true;
    }
    return this.emit(name, ...([built] as unknown as Events[K]));
  }

  #listenerFailed(error: unknown, name: string | symbol): void {
    callIsolated(() => this.#onListenerError?.(error, name));
  }
}
