import { performance } from 'node:perf_hooks';
import {
  computeBackoffMs,
  type Idempotency,
  type IdempotencyLogger,
  InvalidOptionError,
} from '@idempotent-consumer/core';
import { AdapterLog, StopSignal, StoreGate, TypedEventEmitter } from '@idempotent-consumer/core/kit';
import type { ConsumeMessage } from 'amqplib';
import type { AmqpConnection, ConsumeChannel } from './amqp-types';
import { type ChannelClosed, ConsumerChannels } from './channels';
import { type Closable, closeOrClosed, endSocket } from './close';
import { DeliveryActions } from './delivery-actions';
import { DeliveryPort } from './delivery-port';
import { ensureTopology } from './ensure-topology';
import type { ConsumerState, Emit, RabbitMqIdempotencyEvents } from './events';
import type { RabbitMqHandler } from './handler';
import {
  type RabbitMqIdempotencyOptions,
  type ResolvedConsumerOptions,
  resolveConsumerOptions,
} from './options';
import { consumerTelemetry } from './telemetry';
import { type ConsumerTopology, consumerTopology } from './topology';

/**
 * What an {@link IdempotentConsumer} is built from; passed apart from the options. Give exactly one of
 * `connection` and `connect`.
 */
export interface RabbitMqIdempotencyDependencies {
  /** The runner (and through it the store) that claims and records every delivery. */
  readonly idempotency: Idempotency;
  /**
   * An amqplib connection (`await amqplib.connect(url)`), yours: the consumer opens its own channels on
   * it (a consume channel, a confirm channel for republishing, a scratch channel for topology checks) and
   * never closes it. When one of its channels closes the consumer opens new ones on it; when the
   * connection itself closes the consumer is `closed` for good (give `connect` to survive that).
   */
  readonly connection?: AmqpConnection;
  /**
   * Opens a connection (`() => amqplib.connect(url)`): the consumer owns the connections it opens this
   * way, opens a new one (with `reconnectBackoff`) whenever the connection closes, and closes the last one
   * at `stop()`.
   */
  readonly connect?: () => Promise<AmqpConnection>;
  /**
   * Where what a person must not miss is logged as warnings, never a line per successful message: the
   * first message dead-lettered (or run unprotected) for a missing key, the first with an invalid key, the
   * store unavailable and recovered (once per outage), a lease lost, a result omitted (the runner's
   * warnings, when the runner does not log to this same logger already), a Redis connection error (once
   * per outage), a consume channel or connection that closed, a reconnect. Any `{ warn, error }`
   * (console, pino, winston); `false` for none. The same option as the Kafka and SQS adapters'.
   * @defaultValue console
   */
  readonly logger?: IdempotencyLogger | false;
}

/**
 * An effectively-once RabbitMQ consumer (amqplib, manual acks). Every delivery is claimed in the
 * idempotency store, and each outcome maps to one broker decision (docs/design.md#outcome-to-broker-action):
 *
 * | outcome | broker action |
 * | --- | --- |
 * | ACQUIRED / ACQUIRED_STALE, handler returned | COMPLETED is written, then `ack` on the delivering channel |
 * | DUPLICATE | `ack` |
 * | CONFLICT | wait up to `conflictWaitMs` for the holder's outcome (DUPLICATE: `ack`); still held: republish to the delay tier of `min(remaining lease, maxConflictDelayMs)`, confirm, then `ack` |
 * | handler threw, retryable | record RELEASED; republish to a delay tier (backoff), confirm, then `ack` |
 * | attempts exhausted, non-retryable, PAYLOAD_MISMATCH, FAILED record, missing key (`dead-letter`) | publish to the dead-letter exchange with `x-idempotency-*` headers, confirm, then `ack` |
 * | lease lost while the handler ran | handler returned: `ack`; handler threw: delay tier |
 * | store unavailable | fail closed: `basic.cancel`, `nack` with requeue, probe the store with backoff, consume again |
 *
 * A message is acked only when its handler completed, it is a proven duplicate, or a copy of it is
 * confirmed by the broker in a delay tier or the dead-letter exchange. Since COMPLETED is written before
 * the ack, a lost ack comes back as a DUPLICATE. The life cycle (`start`, `stop`, reconnecting after a
 * closed channel or connection) is here; each delivery is handled by a `DeliveryProcessor`, its decision
 * carried out by a `DeliveryActions`, on channels kept by `ConsumerChannels`.
 */
export class IdempotentConsumer<T = unknown> extends TypedEventEmitter<RabbitMqIdempotencyEvents> {
  /** The names of the queues and exchanges this consumer relies on (README, "Topology"). */
  readonly topology: ConsumerTopology;

  readonly #options: ResolvedConsumerOptions;
  readonly #dependencies: RabbitMqIdempotencyDependencies;
  readonly #log: AdapterLog;
  #unwatchRedis: (() => void) | undefined;
  /** Stops closing the store gate on the runner's unanswered store calls (see {@link #start}). */
  #unfollowStore: (() => void) | undefined;
  #reconnecting: Promise<void> | undefined;
  readonly #channels: ConsumerChannels;
  readonly #gate: StoreGate;
  readonly #deliveries: DeliveryPort<T>;
  /** The deliveries being handled, by their processing task. */
  readonly #inFlight = new Map<Promise<void>, ConsumeMessage>();
  readonly #stopping = new StopSignal();
  /**
   * Aborted when `stop()` gives up on the deliveries still in flight (`stopTimeoutMs`): their handlers'
   * signal aborts, and nothing more is published, acked or nacked for them.
   */
  readonly #abandoning = new StopSignal();
  readonly #emitEvent: Emit = (name, ...payload) => void this.emit(name, ...payload);
  #state: ConsumerState = 'idle';
  #consumerTag: string | undefined;
  #cancelling: Promise<unknown> | undefined;
  /** The last `basic.consume` (settled: never rejects), for a resume or `stop()` to await. */
  #consuming: Promise<void> | undefined;
  /** The first `stop()`, which every later call returns. */
  #stopped: Promise<{ abandoned: number }> | undefined;
  /** The `start()` under way, for `stop()` to await. */
  #starting: Promise<void> | undefined;

  /**
   * @throws {@link @idempotent-consumer/core!InvalidOptionError} when an option is out of range, a dependency is missing, or the
   *   lease is not below the broker's acknowledgement timeout.
   */
  constructor(
    dependencies: RabbitMqIdempotencyDependencies,
    options: RabbitMqIdempotencyOptions,
    handler: RabbitMqHandler<T>,
  ) {
    super();
    const { idempotency, connection, connect } = dependencies ?? {};
    if (!idempotency || (connection === undefined) === (connect === undefined)) {
      throw new InvalidOptionError(
        'createIdempotentConsumer needs { idempotency, connection } or { idempotency, connect }',
      );
    }
    if (connect !== undefined && typeof connect !== 'function') {
      throw new InvalidOptionError('connect must be a function that opens a connection');
    }
    if (typeof handler !== 'function') throw new InvalidOptionError('handler must be a function');
    this.#dependencies = dependencies;
    this.#options = resolveConsumerOptions(options, idempotency.options.leaseMs);
    this.#log = AdapterLog.for(
      idempotency,
      dependencies.logger,
      `the consumer of queue ${this.#options.queue}`,
      { queue: this.#options.queue, scope: this.#options.scope },
    );
    this.topology = consumerTopology(this.#options);
    this.#channels = new ConsumerChannels((event) => this.#onChannelClosed(event));
    this.#gate = new StoreGate(
      idempotency.store,
      { storeProbeBackoff: this.#options.storeProbeBackoff, log: this.#log },
      {
        // Whoever closed it (a claim, a give-back or a completion written late failing closed): pause.
        onStoreUnavailable: ({ error }) => {
          this.emit('storeUnavailable', { queue: this.#options.queue, error });
          this.#paused();
        },
        onStoreRecovered: ({ downMs }) => this.emit('storeRecovered', { queue: this.#options.queue, downMs }),
      },
    );
    const actions = new DeliveryActions({
      topology: this.topology,
      publisher: () => this.#channels.publisher(),
      acks: (channel) => this.#channels.acks(channel),
      requeueAfterMs: this.#options.delayTiersMs[0]!,
      signal: this.#stopping.signal,
      abandoned: () => this.#abandoning.signal.aborted,
      emit: this.#emitEvent,
    });
    this.#deliveries = new DeliveryPort<T>({
      idempotency,
      handler,
      options: this.#options,
      policy: {
        delayTiersMs: this.#options.delayTiersMs,
        retryBackoff: this.#options.retryBackoff,
        maxAttempts: this.#options.runOverrides.maxAttempts ?? idempotency.options.maxAttempts,
        maxConflictDelayMs: this.#options.maxConflictDelayMs,
        isRetryable: idempotency.options.isRetryable,
      },
      actions,
      admission: () =>
        this.#state === 'running'
          ? 'running'
          : this.#state === 'paused' || this.#state === 'reconnecting'
            ? 'paused'
            : 'stopping',
      gate: this.#gate,
      emit: this.#emitEvent,
      log: this.#log,
      telemetry: consumerTelemetry(this.#options.queue, this.#options.telemetry),
      // A stop ends a wait for a conflicting holder early: the delivery is then delayed like any CONFLICT.
      stopping: this.#stopping.signal,
      abandoning: this.#abandoning.signal,
    });
  }

  /** Where the consumer is in its life cycle. */
  get state(): ConsumerState {
    return this.#state;
  }

  /**
   * How many deliveries are being handled now (claimed, running, or being republished); after a `stop()`
   * that abandoned some, those whose handling has not ended yet (a handler that has not returned).
   */
  get inFlight(): number {
    return this.#inFlight.size;
  }

  /**
   * Checks that the store answers (one ping, {@link IdempotentConsumer.checkStore}; under the runner's
   * `storeFailureMode: 'open'` a store that does not answer is only logged), opens a connection
   * (with `connect`), declares or checks the topology, opens the consume channel (with `prefetch`) and the
   * confirm channel, and starts consuming (`basic.consume`, manual acks). Resolves once subscribed, or
   * once a `stop()` called meanwhile ended it (nothing is consumed then, and what it opened is closed).
   * A start that fails closes what it opened, the connection from `connect` included.
   * @throws {@link @idempotent-consumer/core!StoreUnavailableError} when the store does not answer the ping and the runner fails closed (nothing is opened).
   * @throws {@link @idempotent-consumer/core!TopologyMismatchError} when the topology is missing or differs (nothing is consumed).
   * @throws {@link @idempotent-consumer/core!InvalidOptionError} when called twice.
   * @throws the error of `connect`, or of opening a channel, when the broker cannot be reached.
   */
  async start(): Promise<void> {
    if (this.#state !== 'idle') throw new InvalidOptionError(`start() was already called (${this.#state})`);
    this.#state = 'starting';
    this.#starting = this.#start();
    try {
      await this.#starting;
    } finally {
      this.#starting = undefined;
    }
  }

  /**
   * {@link IdempotentConsumer.start}'s steps. A `stop()` meanwhile sets `stopping`: the next step is not
   * taken, and `stop()` (which awaits this) closes what the steps opened. Its abort also ends the store
   * check's wait for a Redis client still connecting, and no ping is sent after it.
   */
  async #start(): Promise<void> {
    // From here to stop() or close(): the runner's warnings reach this consumer's logger, and the Redis
    // client's errors are watched (a consumer that is built but never started attaches nothing).
    this.#log.open();
    this.#unwatchRedis = StoreGate.watchRedisErrors(this.#dependencies.idempotency.store, this.#log);
    // An extension or a write after a handler the store does not answer pauses the consumer at once.
    this.#unfollowStore = this.#gate.follow(this.#dependencies.idempotency);
    try {
      // A stop() meanwhile ends the check's wait for a Redis client still connecting (up to 5 s) at once.
      await StoreGate.checkAtStart(this.#dependencies.idempotency, this.#log, this.#stopping.signal);
      if (this.#state !== 'starting') return;
      await this.#open();
      if (this.#state !== 'starting') return;
      this.#state = 'running';
      await this.#consume();
      if (this.#state !== 'running') return;
      this.emit('started', { queue: this.#options.queue, consumerTag: this.#consumerTag! });
    } catch (error) {
      // stopping: stop() waits for this; stopped: stop() gave up waiting (stopTimeoutMs), and the step
      // under way failed on the channels it closed for good.
      const stopped = this.#state === 'stopping' || this.#state === 'stopped';
      this.#state = 'stopped';
      this.#release();
      await this.#channels.dispose();
      await this.#closeOwnedConnection();
      // stop() was called meanwhile: it asked for what happened; a step that failed while it closed
      // things is no error of start().
      if (stopped) return;
      throw error;
    }
  }

  /**
   * Sends one ping to the idempotency store (bounded by the store's command timeout); `start()` calls it
   * first. The same check as the Kafka wrappers' and the SQS forms' `checkStore()`.
   * @throws {@link @idempotent-consumer/core!StoreUnavailableError} naming the queue and where Redis is (host and port).
   */
  checkStore(): Promise<void> {
    return StoreGate.check(this.#dependencies.idempotency.store, this.#log.where);
  }

  /** Stops listening to the Redis client and to the runner, and detaches the logger from the runner. */
  #release(): void {
    this.#unwatchRedis?.();
    this.#unwatchRedis = undefined;
    this.#unfollowStore?.();
    this.#unfollowStore = undefined;
    this.#log.close();
  }

  /**
   * Stops consuming (`basic.cancel`), requeues deliveries not started yet (`nack`), ends the waits for a
   * conflicting holder at once (such a delivery goes to its delay tier, as a CONFLICT still held does)
   * and the signal of handlers run without a claim (`missingKey: 'process'`, or failing open under the
   * runner's `storeFailureMode: 'open'`), then waits up to
   * `stopTimeoutMs` for the deliveries in flight to finish: their handlers, the outcome writes, the
   * republishes and their publisher confirms, the acks. Called during `start()` or a reconnect, that wait
   * includes the step under way (a `connect()` under way is not waited for: the connection it opens later
   * is closed when it arrives; nor is the store check's wait for a Redis client still connecting: it ends
   * at once, without a ping). A `basic.cancel` or `basic.consume` the broker does not answer (it stopped
   * reading a connection blocked by a memory or disk alarm) is waited for within that time too.
   *
   * When `stopTimeoutMs` runs out, the deliveries still in flight are abandoned, and counted:
   * - the `signal` of their handlers aborts (a handler that ignores it may still finish: the runner then
   *   records its outcome, which the redelivery meets);
   * - nothing more is sent for them: no ack, no nack, no copy to a delay tier or the dead-letter exchange;
   *   a copy whose confirm arrives later is not acked (it and the redelivery may both exist: the record
   *   turns the second into a `DUPLICATE`, a `CONFLICT`, or a FAILED record acked without another copy);
   * - each is reported once, before `stopped`, by a `settled` event with `{ action: 'leave', reason:
   *   'abandoned' }` (the SQS poller's shape; `outcome` `undefined`, `attempt` 0) and counted as the
   *   `leave` broker action in telemetry; no event follows for it, even when its handler returns later;
   * - they stay unacked, so the broker requeues them when their channel closes, below, and redelivers
   *   them (`redelivered`); their idempotency record makes that safe: COMPLETED (the handler finished
   *   meanwhile) is a `DUPLICATE`, acked without running; a claim still held is a `CONFLICT` until the
   *   handler finishes or its lease lapses; RELEASED (the handler threw on its aborted signal) runs again.
   *
   * Then it closes the channels it opened (sending the acks still waiting for the end of the turn; the
   * broker requeues anything left unacked) and the connection it opened with `connect`, waiting for what
   * is left of `stopTimeoutMs`, at least 1 s: a close the broker does not answer (no `close-ok`) is not
   * waited for beyond that. The connection it opened with `connect` is then ended with its socket, so the
   * broker requeues at once and no amqplib timer keeps the process alive. A `connection` you gave is never
   * closed: channels whose close is unanswered are left to it (the broker requeues their deliveries when
   * it reads the close, or when you close the connection). So `stop()` resolves within about
   * `stopTimeoutMs` + 1 s, whatever the broker does. A start or reconnect that outlives it opens nothing:
   * a channel that opens late is closed at once.
   *
   * Emits `stopped` and resolves with `{ abandoned }`, the number of deliveries abandoned. Safe to call
   * more than once: every call returns the first call's promise. After a `start()` that failed (it closed
   * what it opened), it resolves with `{ abandoned: 0 }` once that start is done, and emits nothing.
   */
  stop(): Promise<{ abandoned: number }> {
    // One stop for all callers: a second call that resolved on its own (once nothing was in flight) could
    // resolve while the first still waited for a reconnect, a cancel or the channels to close.
    this.#stopped ??= this.#stop();
    return this.#stopped;
  }

  /** {@link IdempotentConsumer.stop}'s steps, run once. */
  async #stop(): Promise<{ abandoned: number }> {
    if (this.#state === 'stopped') {
      // A start() that failed closes what it opened: wait for it to be done. No delivery is in flight:
      // basic.consume was its last step, and nothing after it fails.
      await this.#starting?.catch(ignore);
      return { abandoned: 0 };
    }
    const starting = this.#starting;
    this.#state = 'stopping';
    this.#stopping.abort();
    this.#gate.dispose();
    const { stopTimeoutMs } = this.#options;
    const since = performance.now();
    const drained = await StopSignal.within(this.#drain(starting), stopTimeoutMs);
    const abandoned = drained === 'timeout' ? this.#abandon() : 0;
    // The closes get what is left of stopTimeoutMs, at least 1 s: a close-ok that never comes (a blocked
    // connection) does not hold stop(); the connection from `connect` then ends with its socket.
    const leftMs = stopTimeoutMs - (performance.now() - since);
    const closed = await StopSignal.within(this.#closeAll(), Math.max(leftMs, StopSignal.FINAL_STEP_MIN_MS));
    if (closed === 'timeout' && this.#dependencies.connect && this.#channels.connection) {
      endSocket(
        this.#channels.connection,
        `The broker did not answer the close of the consumer of queue ${this.#options.queue} within ${Math.round(Math.max(leftMs, StopSignal.FINAL_STEP_MIN_MS))} ms`,
      );
    }
    this.#release();
    this.#state = 'stopped';
    this.emit('stopped', { queue: this.#options.queue, abandoned });
    return { abandoned };
  }

  /**
   * What `stop()` waits for, up to `stopTimeoutMs`: the start or reconnect step under way, the last
   * `basic.consume` and the `basic.cancel`, then every delivery in flight. Goes on unawaited when the time
   * ran out (nothing it does then reaches the broker: the channels are closed).
   */
  async #drain(starting: Promise<void> | undefined): Promise<void> {
    // A start() under way takes no further step; what it opened is closed after this.
    await starting?.catch(ignore);
    // Nor does a reconnect: its attempt under way ends (closing what it opened) first, so nothing is
    // opened or declared after stop() resolved.
    await this.#reconnecting;
    // A basic.consume in flight (a reconnect's, a resume's) has no consumer tag yet to cancel: wait for it.
    await this.#consuming;
    await this.#cancel();
    while (this.#inFlight.size > 0) await Promise.allSettled([...this.#inFlight.keys()]);
  }

  /**
   * Gives up on the deliveries in flight: their handlers' signal aborts, the actions sends nothing more
   * for any delivery, and each one not settled yet (acked or nacked) is reported `settled` with
   * `leave`/`abandoned`. @returns how many.
   */
  #abandon(): number {
    this.#abandoning.abort();
    return this.#deliveries.abandon();
  }

  /** Closes the channels, then the connection from `connect`; never rejects. */
  async #closeAll(): Promise<void> {
    await this.#channels.dispose();
    await this.#closeOwnedConnection();
  }

  /** The connection to open channels on: the given one, or the open one from `connect` (else a new one). */
  async #connection(): Promise<AmqpConnection> {
    const { connection, connect } = this.#dependencies;
    if (connection) return connection;
    const current = this.#channels.connection;
    if (current && !this.#channels.connectionClosed) return current;
    await this.#closeOwnedConnection();
    const opened = await this.#connectUnlessStopped(connect!);
    // For as long as it lives, closing included: an 'error' without a listener would crash the process.
    opened.on?.('error', ignore);
    return opened;
  }

  /**
   * `connect()`, given up when `stop()` is called meanwhile: `amqplib.connect` to a host that does not
   * answer waits for the operating system's TCP timeout (minutes), or for ever when the broker accepts
   * the socket but not the AMQP handshake, and `stop()` waits for the start or reconnect attempt under
   * way. A connection that arrives after it gave up is closed at once.
   * @throws an `Error` when `stop()` was called first; the error of `connect`.
   */
  async #connectUnlessStopped(connect: () => Promise<AmqpConnection>): Promise<AmqpConnection> {
    const connecting = connect();
    const outcome = await StopSignal.unless(connecting, this.#stopping.signal);
    if (!outcome.aborted) return outcome.value;
    void connecting.then((late) => {
      late.on?.('error', ignore);
      return closeConnection(late);
    }, ignore);
    throw new Error('stop() was called while connect() was opening a connection');
  }

  async #closeOwnedConnection(): Promise<void> {
    const current = this.#channels.connection;
    if (!this.#dependencies.connect || !current) return;
    await closeConnection(current);
  }

  /** Topology, then the consume and confirm channels, on the current (or a new) connection. */
  async #open(): Promise<void> {
    const connection = await this.#connection();
    try {
      await ensureTopology(connection, this.topology, this.#options.topology);
      await this.#channels.open(connection, this.#options.prefetch);
    } catch (error) {
      // A connection `connect` just opened is not the channels' yet: close it here, or every failed
      // start or reconnect attempt would leave a connection (and its heartbeat timer) open. So is one
      // whose topology check outlived stop(): the channels, closed for good, refuse it.
      if (this.#dependencies.connect && connection !== this.#channels.connection) {
        await closeConnection(connection);
      }
      throw error;
    }
  }

  /**
   * `basic.consume` on the consume channel, kept in `#consuming` until answered. A store outage that
   * pauses the consumer meanwhile finds no consumer tag to cancel (`#paused`): the consumer the answer
   * registers is then cancelled here, or the broker would go on delivering to a paused consumer (each
   * delivery nacked and redelivered at once while the store is down) and the resume would register a
   * second one on the queue.
   */
  async #consume(): Promise<void> {
    const consuming = this.#subscribe();
    this.#consuming = consuming.catch(ignore);
    await consuming;
  }

  /** {@link IdempotentConsumer.#consume}'s `basic.consume`, and the cancel of a consumer paused meanwhile. */
  async #subscribe(): Promise<void> {
    const channel = this.#channels.consume;
    if (!channel) throw new Error('The consume channel closed');
    const reply = await channel.consume(
      this.#options.queue,
      (message) => this.#onDelivery(channel, message),
      {
        noAck: false,
        ...(this.#options.consumerTag === undefined ? {} : { consumerTag: this.#options.consumerTag }),
      },
    );
    this.#consumerTag = reply.consumerTag;
    if (this.#state === 'paused') await this.#cancel();
  }

  async #cancel(): Promise<void> {
    const tag = this.#consumerTag;
    const channel = this.#channels.consume;
    this.#consumerTag = undefined;
    if (tag !== undefined && channel) {
      this.#cancelling = channel.cancel(tag).catch(() => {
        // The channel is closing; the broker stops delivering to it anyway.
      });
    }
    await this.#cancelling;
  }

  #onDelivery(channel: ConsumeChannel, message: ConsumeMessage | null): void {
    // stop() gave up on its deliveries, or stopped without the broker answering its cancel and close: the
    // broker requeues this one with the channel. Nothing runs, nothing is sent or reported.
    if (this.#abandoning.signal.aborted || this.#state === 'stopped') return;
    if (message === null) {
      // basic.cancel from the broker: the queue was deleted or its node went away.
      if (channel !== this.#channels.consume) return;
      this.#consumerTag = undefined;
      // Paused too: the broker cancelled before our own basic.cancel reached it (the queue went away).
      if (this.#state === 'running' || this.#state === 'paused') this.#cancelledByBroker();
      return;
    }
    this.emit('delivery', {
      queue: this.#options.queue,
      deliveryTag: message.fields.deliveryTag,
      redelivered: message.fields.redelivered,
    });
    const task = this.#deliveries.process(message, channel);
    this.#inFlight.set(task, message);
    void task.finally(() => this.#inFlight.delete(task));
  }

  /**
   * The store gate closed (a store call of the pipeline went unanswered, failing closed): stops consuming
   * until a probe answers.
   */
  #paused(): void {
    if (this.#state === 'running') {
      this.#state = 'paused';
      void this.#cancel();
    }
    void this.#resumeWhenStoreAnswers();
  }

  async #resumeWhenStoreAnswers(): Promise<void> {
    if (!(await this.#gate.waitUntilOpen(this.#stopping.signal))) return;
    // A basic.consume still in flight (a reconnect's) ends first, its consumer cancelled as paused: the
    // one registered below is then the only one.
    await this.#consuming;
    await this.#cancelling;
    if (this.#state !== 'paused') return; // stopping, or reconnecting (it consumes when done)
    this.#state = 'running';
    await this.#consume().catch(() => {
      // The consume channel closed meanwhile: its 'close' handler reconnects.
    });
  }

  /**
   * A channel closed without `stop()`: report it; when it was the consume channel, consume again on new
   * channels (a new connection from `connect` when the connection closed), or close for good when the
   * connection was given and is closed.
   */
  #onChannelClosed(event: ChannelClosed): void {
    if (this.#state === 'stopping' || this.#state === 'stopped') return;
    this.emit('channelClosed', {
      queue: this.#options.queue,
      channel: event.channel,
      error: event.error,
      reason: event.reason,
    });
    if (event.channel !== 'consume') return;
    // While starting, start() fails with the channel's error; while closed or reconnecting, nothing to do.
    if (this.#state === 'starting' || this.#state === 'closed' || this.#state === 'reconnecting') return;
    this.#consumerTag = undefined;
    if (isConsumeNotFound(event.error)) {
      // The work queue is gone (deleted while the consumer was paused, or between a reconnect's topology
      // check and its consume): a reconnect would fail its topology check until stop(), so it ends as the
      // broker's basic.cancel of a running consumer does.
      this.#cancelledByBroker();
      return;
    }
    const why = event.reason
      ? `${event.reason.replyCode} ${event.reason.replyText}`
      : String(event.error ?? 'closed by the client');
    if (event.connectionClosed && !this.#dependencies.connect) {
      this.#closeForGood(why);
      return;
    }
    this.#warn(
      `the consume channel of queue ${this.#options.queue} closed (${why}); the broker requeues its unacked messages and the consumer reconnects`,
    );
    this.#reconnect();
  }

  /**
   * The work queue is gone (the broker's `basic.cancel`, or a `basic.consume` answered 404): the consumer
   * is `closed` with a `cancelled` event, whether it was running or paused for a store outage (a paused
   * consumer's resume then consumes nothing). Deliveries in flight still settle on their channel.
   */
  #cancelledByBroker(): void {
    this.#state = 'closed';
    this.emit('cancelled', { queue: this.#options.queue });
  }

  /** The given connection closed: no channel can be opened on it again, so the consumer is `closed`. */
  #closeForGood(why: string): void {
    this.#state = 'closed';
    this.#stopping.abort();
    this.#release();
    this.#warn(
      `the connection of the consumer of queue ${this.#options.queue} closed (${why}); consumption stopped for good. Pass connect instead of connection to reconnect.`,
    );
  }

  /** Logs a warning a person must not miss; a logger that throws changes nothing. */
  #warn(message: string, fields: Record<string, unknown> = {}): void {
    this.#log.warn(message, fields);
  }

  /**
   * Reconnects, single-flight: a channel close and its connection's close (or a close during a
   * reconnect) start one loop; a close that lands while the loop runs makes it go on instead of
   * starting another.
   */
  #reconnect(): void {
    this.#state = 'reconnecting';
    this.#reconnecting ??= this.#reconnectLoop().finally(() => {
      this.#reconnecting = undefined;
    });
  }

  /** Whether a reconnect loop is running (for tests: one at most). */
  get reconnecting(): boolean {
    return this.#reconnecting !== undefined;
  }

  async #reconnectLoop(): Promise<void> {
    const since = performance.now();
    for (let attempt = 1; ; attempt++) {
      const delayMs = computeBackoffMs(attempt, this.#options.reconnectBackoff);
      if (!(await StopSignal.sleep(delayMs, this.#stopping.signal)) || this.#state !== 'reconnecting') return;
      if (!this.#dependencies.connect && this.#channels.connectionClosed) {
        // The consume channel closed alone, then the given connection closed too (its channels' closes
        // were reported while reconnecting, or the attempt failed on it): retrying on it would fail forever.
        this.#closeForGood('while the consumer reconnected');
        return;
      }
      try {
        await this.#channels.close();
        await this.#open();
        if (this.#state !== 'reconnecting') {
          // stop() ran meanwhile and may have closed the channels before these opened: close them too.
          await this.#channels.dispose();
          await this.#closeOwnedConnection();
          return;
        }
        this.#state = this.#gate.closed ? 'paused' : 'running';
        if (this.#state === 'running') await this.#consume();
        else void this.#resumeWhenStoreAnswers();
        // A channel closed again while this loop opened or consumed: the same loop goes on.
        if ((this.#state as ConsumerState) === 'reconnecting') continue;
        // stop() came during the basic.consume: it cancels that consumer; this is no reconnect to report.
        if ((this.#state as ConsumerState) === 'stopping') return;
        const downMs = Math.round(performance.now() - since);
        this.emit('reconnected', { queue: this.#options.queue, attempts: attempt, downMs });
        this.#warn(
          `the consumer of queue ${this.#options.queue} consumes again after ${downMs} ms (${attempt} attempts)`,
          { attempts: attempt, downMs },
        );
        return;
      } catch (error) {
        if (this.#state !== 'reconnecting' && this.#state !== 'running' && this.#state !== 'paused') return;
        this.#state = 'reconnecting';
        this.emit('brokerError', {
          queue: this.#options.queue,
          operation: 'connect',
          error,
          source: undefined,
        });
      }
    }
  }
}

const ignore = (): void => {};

/**
 * Whether a channel's close error is RabbitMQ's 404 NOT_FOUND answer to `basic.consume` (class 60, method
 * 20): the queue does not exist. amqplib copies the close frame's reply code, class and method ids onto it.
 */
function isConsumeNotFound(error: unknown): boolean {
  if (typeof error !== 'object' || error === null) return false;
  const { code, classId, methodId } = error as { code?: unknown; classId?: unknown; methodId?: unknown };
  return code === 404 && classId === 60 && methodId === 20;
}

/**
 * Closes a connection the consumer opened with `connect`, which keeps its `error` listener: the broker
 * can go away during the close handshake (no `close-ok` comes), and amqplib then emits `error`
 * (`Unexpected close`, `ECONNRESET`), which ends the process when nobody listens, and never settles
 * `close()` ({@link closeOrClosed} ends with the connection's `close` event). Never rejects.
 */
function closeConnection(connection: AmqpConnection): Promise<void> {
  // amqplib's connections close; AmqpConnection leaves `close` out, as the consumer closes only its own.
  return closeOrClosed(connection as AmqpConnection & Closable);
}

/**
 * Creates an {@link IdempotentConsumer}, the one way to build one; call `start()` on it to consume.
 * @throws {@link @idempotent-consumer/core!InvalidOptionError} when an option is out of range or a dependency is missing.
 */
export function createIdempotentConsumer<T>(
  dependencies: RabbitMqIdempotencyDependencies,
  options: RabbitMqIdempotencyOptions,
  handler: RabbitMqHandler<T>,
): IdempotentConsumer<T> {
  return new IdempotentConsumer<T>(dependencies, options, handler);
}
