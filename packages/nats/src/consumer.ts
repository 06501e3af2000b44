import {
  computeBackoffMs,
  type Idempotency,
  type IdempotencyLogger,
  InvalidOptionError,
  TopologyMismatchError,
} from '@idempotent-consumer/core';
import { AdapterLog, StopSignal, StoreGate, TypedEventEmitter } from '@idempotent-consumer/core/kit';
import type { Consumer, ConsumerMessages, JetStreamClient, JsMsg } from '@nats-io/jetstream';
import type { NatsIdempotencyEvents } from './events';
import type { NatsHandler } from './handler';
import { type JetStreamLimits, NatsMessagePort } from './message-port';
import { type NatsIdempotencyOptions, type ResolvedNatsOptions, resolveNatsOptions } from './options';

/** What a {@link NatsIdempotentConsumer} is built from; passed apart from the options. */
export interface NatsIdempotencyDependencies {
  /** The runner (and through it the store) that claims and records every message. */
  readonly idempotency: Idempotency;
  /** A JetStream client (`jetstream(nc)` of `@nats-io/jetstream`), yours: its connection is never closed here. */
  readonly jetstream: JetStreamClient;
  /**
   * Where the consumer warns (never a line per message): a key dead-lettered, a store outage, a lease
   * lost, a dead letter that could not be published, the runner's warnings. `false` for none.
   * @defaultValue console
   */
  readonly logger?: IdempotencyLogger | false;
}

type State = 'idle' | 'starting' | 'running' | 'stopping' | 'stopped';

/**
 * An effectively-once JetStream pull consumer. Each message is claimed in the idempotency store and its
 * outcome carried out in JetStream's terms (docs/design.md#outcome-to-broker-action, NATS column): `ack`
 * after COMPLETED or a DUPLICATE; `nak(delay)` after a CONFLICT still held or a retryable error; a copy to
 * the dead-letter subject then `term()` for FAILED, PAYLOAD_MISMATCH or attempts exhausted. Every lease
 * heartbeat calls `working()`, so `ack_wait` never lapses under a running handler. When the store does not
 * answer it stops pulling, naks what it cannot claim, and pulls again once a ping answers.
 *
 * @example
 * ```ts
 * const consumer = new NatsIdempotentConsumer({ idempotency, jetstream: js },
 *   { stream: 'PAYMENTS', consumer: 'charger', deadLetterSubject: 'dead.payments' },
 *   async ({ message, fencingToken }) => charge(message.json(), fencingToken));
 * await consumer.start();
 * ```
 */
export class NatsIdempotentConsumer<T = unknown> extends TypedEventEmitter<NatsIdempotencyEvents> {
  readonly #deps: NatsIdempotencyDependencies;
  readonly #options: ResolvedNatsOptions;
  readonly #handler: NatsHandler<T>;
  readonly #log: AdapterLog;
  readonly #gate: StoreGate;
  readonly #stopping = new StopSignal();
  readonly #abandoning = new StopSignal();
  readonly #tasks = new Set<Promise<void>>();
  #state: State = 'idle';
  #port: NatsMessagePort<T> | undefined;
  #batch: ConsumerMessages | undefined;
  #starting: Promise<void> | undefined;
  #loop: Promise<void> | undefined;
  #stopped: Promise<{ abandoned: number }> | undefined;
  #unwatchRedis: (() => void) | undefined;
  #unfollowStore: (() => void) | undefined;
  #wake: (() => void) | undefined;

  /** @throws {@link @idempotent-consumer/core!InvalidOptionError} when a dependency is missing or an option is out of range. */
  constructor(
    dependencies: NatsIdempotencyDependencies,
    options: NatsIdempotencyOptions,
    handler: NatsHandler<T>,
  ) {
    super();
    if (!dependencies?.idempotency || !dependencies.jetstream) {
      throw new InvalidOptionError('NatsIdempotentConsumer needs { idempotency, jetstream }');
    }
    if (typeof handler !== 'function') throw new InvalidOptionError('handler must be a function');
    this.#deps = dependencies;
    this.#options = resolveNatsOptions(options);
    this.#handler = handler;
    const { stream, consumer } = this.#options;
    const where = `the consumer ${consumer} of stream ${stream}`;
    this.#log = AdapterLog.for(dependencies.idempotency, dependencies.logger, where, { stream, consumer });
    this.#gate = new StoreGate(
      dependencies.idempotency.store,
      { storeProbeBackoff: this.#options.storeProbeBackoff, log: this.#log },
      {
        onStoreUnavailable: ({ error }) => {
          this.emit('storeUnavailable', { stream, consumer, error });
          this.#batch?.stop(); // what it pulled already is nak'ed by the loop
          this.#wake?.();
        },
        onStoreRecovered: ({ downMs }) => this.emit('storeRecovered', { stream, consumer, downMs }),
      },
    );
  }

  /** Messages being processed now. */
  get inFlight(): number {
    return this.#tasks.size;
  }

  /** Whether pulling is paused because the store does not answer. */
  get paused(): boolean {
    return this.#gate.closed;
  }

  /**
   * Pings the store, checks the topology, then pulls. Resolves once pulling started, or once a `stop()`
   * called meanwhile ended the start.
   * @throws {@link @idempotent-consumer/core!StoreUnavailableError} when the store does not answer and the runner fails closed.
   * @throws {@link @idempotent-consumer/core!TopologyMismatchError} when the consumer is missing, is not an
   *   explicit-ack pull consumer, has an `ack_wait` not above the lease heartbeat, or no other stream
   *   captures `deadLetterSubject`.
   * @throws {@link @idempotent-consumer/core!InvalidOptionError} when called twice.
   */
  async start(): Promise<void> {
    if (this.#state !== 'idle') throw new InvalidOptionError(`start() was already called (${this.#state})`);
    this.#state = 'starting';
    this.#starting = this.#start();
    await this.#starting;
  }

  async #start(): Promise<void> {
    const { idempotency } = this.#deps;
    const signal = this.#stopping.signal;
    this.#log.open();
    this.#unwatchRedis = StoreGate.watchRedisErrors(idempotency.store, this.#log);
    try {
      await StoreGate.checkAtStart(idempotency, this.#log, signal);
      if (signal.aborted) return;
      const { consumer, limits } = await this.#topology();
      if (signal.aborted) return;
      this.#port = new NatsMessagePort<T>({
        ...this.#deps,
        options: this.#options,
        limits,
        handler: this.#handler,
        events: this,
        gate: this.#gate,
        log: this.#log,
        stopping: signal,
        abandoning: this.#abandoning.signal,
      });
      this.#state = 'running';
      // An extension or a write after a handler that the store does not answer pauses pulling at once.
      this.#unfollowStore = this.#gate.follow(idempotency);
      this.#loop = this.#run(consumer);
      this.emit('started', { stream: this.#options.stream, consumer: this.#options.consumer });
    } catch (error) {
      this.#release();
      if (signal.aborted) return; // stop() was called meanwhile
      this.#state = 'stopped';
      throw error;
    }
  }

  /**
   * One ping to the store (bounded by its command timeout); `start()` calls it first.
   * @throws {@link @idempotent-consumer/core!StoreUnavailableError} naming the consumer and where Redis is.
   */
  checkStore(): Promise<void> {
    return StoreGate.check(this.#deps.idempotency.store, this.#log.where);
  }

  /**
   * Stops pulling and naks the messages pulled but not started (`stopping`, delivered again at once),
   * ends the waits for a conflicting holder, then waits up to `stopTimeoutMs` for the messages in flight.
   * Those still running then are abandoned: their handlers' `signal` aborts, each is reported `settled`
   * with `leave`/`abandoned`, nothing more is sent for them, and JetStream delivers them again after
   * `ack_wait`. Emits `stopped`; later calls return the first call's promise.
   */
  stop(): Promise<{ abandoned: number }> {
    this.#stopped ??= this.#stop();
    return this.#stopped;
  }

  async #stop(): Promise<{ abandoned: number }> {
    if (this.#state === 'idle') {
      this.#state = 'stopped';
      return { abandoned: 0 };
    }
    this.#state = 'stopping';
    this.#stopping.abort();
    this.#batch?.stop();
    this.#gate.dispose();
    this.#wake?.();
    await this.#starting?.catch(() => {});
    const drained = (async () => {
      await this.#loop;
      while (this.#tasks.size > 0) await Promise.allSettled([...this.#tasks]);
    })();
    let abandoned = 0;
    if ((await StopSignal.within(drained, this.#options.stopTimeoutMs)) === 'timeout') {
      this.#abandoning.abort();
      abandoned = this.#port?.abandon() ?? 0;
    }
    this.#release();
    const started = this.#state === 'stopping' && this.#port !== undefined;
    this.#state = 'stopped';
    if (started)
      this.emit('stopped', { stream: this.#options.stream, consumer: this.#options.consumer, abandoned });
    return { abandoned };
  }

  #release(): void {
    this.#unfollowStore?.();
    this.#unfollowStore = undefined;
    this.#unwatchRedis?.();
    this.#unwatchRedis = undefined;
    this.#log.close();
  }

  /** Reads the consumer's settings and finds the dead-letter stream. */
  async #topology(): Promise<{ consumer: Consumer; limits: JetStreamLimits }> {
    const { jetstream, idempotency } = this.#deps;
    const { stream, consumer: name, deadLetterSubject, overrides } = this.#options;
    const mismatch = (what: string, cause?: unknown) =>
      new TopologyMismatchError(`${this.#log.where} cannot start: ${what}`, { cause });
    const manager = await jetstream.jetstreamManager();
    const info = await manager.consumers.info(stream, name).catch((error: unknown) => {
      throw mismatch(
        `the consumer was not found (${String(error)}); create a durable pull consumer first`,
        error,
      );
    });
    const config = info.config;
    if (config.ack_policy !== 'explicit' || config.deliver_subject) {
      throw mismatch('it must be a pull consumer with ack_policy explicit');
    }
    const ackWaitMs = (config.ack_wait ?? 30e9) / 1e6;
    const leaseMs = overrides.leaseMs ?? idempotency.options.leaseMs;
    const heartbeatMs = Math.min(
      idempotency.options.heartbeatIntervalMs,
      Math.max(1, Math.floor(leaseMs / 3)),
    );
    if (ackWaitMs <= heartbeatMs) {
      throw mismatch(`its ack_wait (${ackWaitMs} ms) must be above the lease heartbeat (${heartbeatMs} ms)`);
    }
    const found = await manager.streams.find(deadLetterSubject).catch(() => undefined);
    if (!found || found === stream) {
      throw mismatch(`no stream other than ${stream} captures the dead-letter subject ${deadLetterSubject}`);
    }
    const maxDeliver = config.max_deliver ?? -1;
    const maxAttempts = overrides.maxAttempts ?? idempotency.options.maxAttempts;
    if (maxDeliver > 0 && maxDeliver <= maxAttempts) {
      this.#log.warn(
        `max_deliver ${maxDeliver} is not above maxAttempts ${maxAttempts}: conflicts and store outages count deliveries too, and a message on its last delivery is dead-lettered`,
      );
    }
    const limits = { ackWaitMs, maxDeliver, deadLetter: { subject: deadLetterSubject, stream: found } };
    return { consumer: await jetstream.consumers.get(stream, name), limits };
  }

  /**
   * Pulls while running, one `fetch()` of `concurrency` messages at a time, each started once fewer than
   * `concurrency` run: a fetch stopped early leaves no pull request behind, as a `consume()` refill queued
   * before its stop would. Pauses while the store gate is closed, and naks what it pulled but cannot run.
   */
  async #run(consumer: Consumer): Promise<void> {
    const signal = this.#stopping.signal;
    const { concurrency, retryBackoff, stream, consumer: name } = this.#options;
    for (let failures = 0; !signal.aborted; ) {
      if (!(await this.#gate.waitUntilOpen(signal))) break;
      try {
        const batch = await consumer.fetch({ max_messages: concurrency, expires: 5000 });
        this.#batch = batch;
        if (signal.aborted || this.#gate.closed) batch.stop();
        for await (const message of batch) {
          await this.#room(concurrency - 1);
          if (signal.aborted) this.#port!.notRun(message, 'stopping');
          else if (this.#gate.closed) this.#port!.notRun(message, 'store-unavailable');
          else this.#dispatch(message);
        }
        failures = 0;
      } catch (error) {
        if (signal.aborted) break;
        this.emit('brokerError', { stream, consumer: name, operation: 'fetch', error, source: undefined });
        await StopSignal.sleep(computeBackoffMs(++failures, retryBackoff), signal);
      }
      this.#batch = undefined;
    }
  }

  #dispatch(message: JsMsg): void {
    const task = this.#port!.process(message).finally(() => {
      this.#tasks.delete(task);
      this.#wake?.();
    });
    this.#tasks.add(task);
  }

  /** Resolves once at most `inFlight` messages are in flight, or the consumer stops or pauses. */
  async #room(inFlight: number): Promise<void> {
    while (this.#tasks.size > inFlight && !this.#stopping.signal.aborted && !this.#gate.closed) {
      await new Promise<void>((resolve) => {
        this.#wake = resolve;
      });
    }
  }
}
