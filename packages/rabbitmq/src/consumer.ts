import { EventEmitter } from 'node:events';
import { performance } from 'node:perf_hooks';
import {
  computeBackoffMs,
  type DeadLetterReason,
  describeError,
  type Idempotency,
  InvalidOptionError,
  isIdempotencyError,
  NO_CLAIM_OUTCOME,
  type RunOptions,
  type RunOutcome,
  type RunResult,
} from '@idempotent-consumer/core';
import type { ConsumeMessage, Options } from 'amqplib';
import type { AmqpConnection, ConsumeChannel, PublishChannel } from './amqp-types';
import { ConfirmPublisher } from './confirm-publisher';
import { type BrokerAction, type DecisionPolicy, decideAction } from './decide';
import type { ConsumerState, DeliverySubject, IdempotentConsumerEvents, RequeueReason } from './events';
import type { RabbitHandler } from './handler';
import { attemptFromHeaders, HEADERS } from './headers';
import {
  type IdempotentConsumerOptions,
  type ResolvedConsumerOptions,
  resolveConsumerOptions,
} from './options';
import { type ConsumerTopology, consumerTopology, ensureTopology } from './topology';

/** What an {@link IdempotentConsumer} is built from; passed apart from the options. */
export interface IdempotentConsumerDependencies {
  /** The runner (and through it the store) that claims and records every delivery. */
  readonly idempotency: Idempotency;
  /**
   * The amqplib connection (`await amqplib.connect(url)`). The consumer opens its own channels on it: a
   * consume channel (manual acks, `prefetch`), a confirm channel for republishing, and a scratch channel
   * for topology checks (a failed check closes the channel it ran on). It never closes the connection.
   */
  readonly connection: AmqpConnection;
}

/** Resolves after `ms`, or at once when `signal` aborts. */
function sleep(ms: number, signal: AbortSignal): Promise<void> {
  if (signal.aborted) return Promise.resolve();
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal.addEventListener('abort', done, { once: true });
  });
}

/** The properties of a republished copy: the original's, without `expiration` and `userId`. */
function republishOptions(message: ConsumeMessage, headers: Record<string, unknown>): Options.Publish {
  const p = message.properties;
  const options: Options.Publish = { headers };
  const copy = <K extends keyof Options.Publish>(key: K, value: Options.Publish[K] | undefined) => {
    if (value !== undefined && value !== null) options[key] = value;
  };
  copy('contentType', p.contentType);
  copy('contentEncoding', p.contentEncoding);
  copy('deliveryMode', p.deliveryMode);
  copy('priority', p.priority);
  copy('correlationId', p.correlationId);
  copy('replyTo', p.replyTo);
  copy('messageId', p.messageId);
  copy('timestamp', p.timestamp);
  copy('type', p.type);
  copy('appId', p.appId);
  return options;
}

/**
 * An effectively-once RabbitMQ consumer (amqplib, manual acks). Every delivery is claimed in the
 * idempotency store, and each outcome maps to one broker action (DESIGN.md, "Outcome → broker action"):
 *
 * | outcome | broker action |
 * | --- | --- |
 * | ACQUIRED / ACQUIRED_STALE, handler returned | COMPLETED is written, then `ack` on the delivering channel |
 * | DUPLICATE | `ack` |
 * | CONFLICT | republish to the delay tier of the holder's remaining lease, confirm, then `ack` |
 * | handler threw, retryable | record RELEASED; republish to a delay tier (backoff), confirm, then `ack` |
 * | attempts exhausted, non-retryable, PAYLOAD_MISMATCH, FAILED record, missing key (`reject`) | publish to the dead-letter exchange with `x-idempotency-*` headers, confirm, then `ack` |
 * | lease lost while the handler ran | handler returned: `ack`; handler threw: delay tier |
 * | store unavailable | fail closed: `basic.cancel`, `nack` with requeue, probe the store with backoff, consume again |
 *
 * A message is acked only when its handler completed, it is a proven duplicate, or a copy of it is
 * confirmed by the broker in a delay tier or the dead-letter exchange. Since COMPLETED is written before
 * the ack, a lost ack comes back as a DUPLICATE.
 *
 * @example
 * ```ts
 * const connection = await amqplib.connect('amqp://127.0.0.1');
 * const consumer = createIdempotentConsumer({ idempotency, connection }, { queue: 'payments' },
 *   async ({ message, fencingToken }) => charge(JSON.parse(message.content.toString()), fencingToken));
 * consumer.on('deadLettered', (e) => log.warn(e));
 * await consumer.start();
 * // …
 * await consumer.stop();
 * ```
 */
export class IdempotentConsumer<T = unknown> extends EventEmitter<IdempotentConsumerEvents> {
  /** The resolved options (defaults applied). */
  readonly options: ResolvedConsumerOptions;
  /** The names of the queues and exchanges this consumer relies on (README, "Topology"). */
  readonly topology: ConsumerTopology;

  readonly #idempotency: Idempotency;
  readonly #connection: AmqpConnection;
  readonly #handler: RabbitHandler<T>;
  readonly #policy: DecisionPolicy;
  readonly #runOptions: RunOptions;
  readonly #inFlight = new Set<Promise<void>>();
  readonly #settled = new WeakSet<ConsumeMessage>();
  readonly #stopping = new AbortController();
  #state: ConsumerState = 'idle';
  #channel: ConsumeChannel | undefined;
  #publishChannel: PublishChannel | undefined;
  #publisher: ConfirmPublisher | undefined;
  #publisherOpening: Promise<ConfirmPublisher> | undefined;
  #consumerTag: string | undefined;
  #cancelling: Promise<unknown> | undefined;
  #pausedAt = 0;

  /**
   * @throws {@link InvalidOptionError} when an option is out of range, a dependency is missing, or the
   *   lease is not below the broker's acknowledgement timeout.
   */
  constructor(
    dependencies: IdempotentConsumerDependencies,
    options: IdempotentConsumerOptions,
    handler: RabbitHandler<T>,
  ) {
    super({ captureRejections: false });
    if (!dependencies?.idempotency || !dependencies.connection) {
      throw new InvalidOptionError('createIdempotentConsumer needs { idempotency, connection }');
    }
    if (typeof handler !== 'function') throw new InvalidOptionError('handler must be a function');
    this.#idempotency = dependencies.idempotency;
    this.#connection = dependencies.connection;
    this.#handler = handler;
    this.options = resolveConsumerOptions(options, this.#idempotency.options.leaseMs);
    this.topology = consumerTopology(this.options);
    this.#policy = {
      delayTiersMs: this.options.delayTiersMs,
      retryBackoff: this.options.retryBackoff,
      maxAttempts: this.options.maxAttempts ?? this.#idempotency.options.maxAttempts,
    };
    this.#runOptions = {
      ...(this.options.leaseMs === undefined ? {} : { leaseMs: this.options.leaseMs }),
      ...(this.options.maxAttempts === undefined ? {} : { maxAttempts: this.options.maxAttempts }),
    };
  }

  /** Where the consumer is in its life cycle. */
  get state(): ConsumerState {
    return this.#state;
  }

  /** How many deliveries are being handled now (claimed, running, or being republished). */
  get inFlight(): number {
    return this.#inFlight.size;
  }

  /**
   * Declares or checks the topology, opens the consume channel (with `prefetch`) and the confirm channel,
   * and starts consuming (`basic.consume`, manual acks). Resolves once subscribed.
   * @throws {@link TopologyMismatchError} when the topology is missing or differs (nothing is consumed).
   * @throws {@link InvalidOptionError} when called twice.
   */
  async start(): Promise<void> {
    if (this.#state !== 'idle') throw new InvalidOptionError(`start() was already called (${this.#state})`);
    this.#state = 'starting';
    try {
      await ensureTopology(this.#connection, this.topology, this.options.topology);
      const channel = await this.#connection.createChannel();
      this.#channel = channel;
      let lastError: unknown;
      channel.on('error', (error: unknown) => {
        // The 'close' event that follows reports it; without a listener an 'error' would crash the process.
        lastError = error;
      });
      channel.on('close', () => this.#onChannelClosed('consume', channel, lastError));
      await channel.prefetch(this.options.prefetch);
      await this.#openPublisher();
      if (this.#state !== 'starting') return;
      await this.#consume();
    } catch (error) {
      this.#state = 'stopped';
      await this.#closeChannels();
      throw error;
    }
  }

  /**
   * Stops consuming (`basic.cancel`), requeues deliveries not started yet, waits for the deliveries in
   * flight to finish and be settled, then closes the channels it opened (the broker requeues anything
   * left unacked). Safe to call more than once.
   */
  async stop(): Promise<void> {
    if (this.#state === 'stopped' || this.#state === 'stopping') {
      while (this.#inFlight.size > 0) await Promise.allSettled([...this.#inFlight]);
      return;
    }
    const wasClosed = this.#state === 'closed' || this.#state === 'idle';
    this.#state = 'stopping';
    this.#stopping.abort();
    if (!wasClosed) await this.#cancel();
    while (this.#inFlight.size > 0) await Promise.allSettled([...this.#inFlight]);
    await this.#closeChannels();
    this.#state = 'stopped';
  }

  async #consume(): Promise<void> {
    const channel = this.#channel!;
    this.#state = 'running';
    const reply = await channel.consume(this.options.queue, (message) => this.#onDelivery(message), {
      noAck: false,
      ...(this.options.consumerTag === undefined ? {} : { consumerTag: this.options.consumerTag }),
    });
    this.#consumerTag = reply.consumerTag;
  }

  async #cancel(): Promise<void> {
    const tag = this.#consumerTag;
    this.#consumerTag = undefined;
    if (tag !== undefined && this.#channel) {
      this.#cancelling = this.#channel.cancel(tag).catch(() => {
        // The channel is closing; the broker stops delivering to it anyway.
      });
    }
    await this.#cancelling;
  }

  /** The confirm channel's publisher, (re)opened on first use after it closed; one open at a time. */
  #openPublisher(): Promise<ConfirmPublisher> {
    this.#publisherOpening ??= this.#createPublisher().finally(() => {
      this.#publisherOpening = undefined;
    });
    return this.#publisherOpening;
  }

  async #createPublisher(): Promise<ConfirmPublisher> {
    const channel = await this.#connection.createConfirmChannel();
    let lastError: unknown;
    channel.on('error', (error: unknown) => {
      // Reported through 'close'; the publisher rejects pending publishes.
      lastError = error;
    });
    channel.on('close', () => {
      if (this.#publishChannel === channel) {
        this.#publishChannel = undefined;
        this.#publisher = undefined;
        if (this.#state !== 'stopping' && this.#state !== 'stopped') {
          this.#emit('channelClosed', { queue: this.options.queue, channel: 'publish', error: lastError });
        }
      }
    });
    this.#publishChannel = channel;
    this.#publisher = new ConfirmPublisher(channel);
    return this.#publisher;
  }

  #onChannelClosed(which: 'consume', channel: ConsumeChannel, error: unknown): void {
    if (this.#channel !== channel) return;
    this.#channel = undefined;
    this.#consumerTag = undefined;
    if (this.#state === 'stopping' || this.#state === 'stopped') return;
    this.#state = 'closed';
    this.#stopping.abort();
    this.#emit('channelClosed', { queue: this.options.queue, channel: which, error });
  }

  async #closeChannels(): Promise<void> {
    const channels = [this.#publishChannel, this.#channel];
    this.#publishChannel = undefined;
    this.#publisher = undefined;
    this.#channel = undefined;
    await Promise.allSettled(channels.map((c) => c?.close()));
  }

  #onDelivery(message: ConsumeMessage | null): void {
    if (message === null) {
      // basic.cancel from the broker: the queue was deleted or its node went away.
      this.#consumerTag = undefined;
      if (this.#state === 'running') {
        this.#state = 'closed';
        this.#emit('cancelled', { queue: this.options.queue });
      }
      return;
    }
    this.#emit('delivery', {
      queue: this.options.queue,
      deliveryTag: message.fields.deliveryTag,
      redelivered: message.fields.redelivered,
    });
    const task = this.#handle(message).catch((error: unknown) => {
      // A bug in this adapter, never a handler error (the runner catches those): give the message back.
      this.#requeue(message, this.#subject(message, undefined), 'internal-error', error);
    });
    this.#inFlight.add(task);
    void task.finally(() => this.#inFlight.delete(task));
  }

  #subject(message: ConsumeMessage, key: string | undefined): DeliverySubject {
    return {
      queue: this.options.queue,
      scope: this.options.scope,
      key,
      deliveryTag: message.fields.deliveryTag,
      redelivered: message.fields.redelivered,
    };
  }

  async #handle(message: ConsumeMessage): Promise<void> {
    if (this.#state !== 'running') {
      const reason: RequeueReason = this.#state === 'paused' ? 'paused' : 'stopping';
      this.#requeue(message, this.#subject(message, undefined), reason, undefined);
      return;
    }
    let key: string | undefined;
    try {
      key = this.options.idempotencyKey(message);
    } catch (error) {
      await this.#apply(message, this.#subject(message, undefined), undefined, {
        kind: 'dead-letter',
        reason: 'invalid-key',
        attempt: 0,
        error: describeError(error),
      });
      return;
    }
    const subject = this.#subject(message, key);
    if (key === undefined) {
      if (this.options.missingKey === 'reject') {
        this.#emit('missingKey', { ...subject, action: 'rejected' });
        await this.#apply(message, subject, undefined, {
          kind: 'dead-letter',
          reason: 'missing-key',
          attempt: 0,
          error: 'The message carries no idempotency key (missingKey: reject)',
        });
        return;
      }
      this.#emit('missingKey', { ...subject, action: 'processed' });
      await this.#runUnprotected(message, subject);
      return;
    }

    let result: RunResult<T>;
    try {
      result = await this.#idempotency.run<T>(
        {
          scope: this.options.scope,
          key,
          ...(this.options.fingerprintPayload ? { payload: message.content } : {}),
        },
        (context) => this.#handler({ ...context, message }),
        this.#runOptions,
      );
    } catch (error) {
      if (isIdempotencyError(error) && error.code === 'INVALID_IDEMPOTENCY_KEY') {
        await this.#apply(message, subject, undefined, {
          kind: 'dead-letter',
          reason: 'invalid-key',
          attempt: 0,
          error: describeError(error),
        });
        return;
      }
      // StoreUnavailableError (or a reply this version cannot read): fail closed, ack nothing.
      this.#pause(error);
      this.#requeue(message, subject, 'store-unavailable', error);
      return;
    }
    const unprotectedAttempt = attemptFromHeaders(message.properties.headers) + 1;
    const action = decideAction(
      result,
      this.#policy,
      unprotectedAttempt,
      this.#idempotency.options.isRetryable,
    );
    await this.#apply(message, subject, result.outcome, action);
  }

  /** `missingKey: 'process'`: runs the handler without a claim; attempts are counted in a header. */
  async #runUnprotected(message: ConsumeMessage, subject: DeliverySubject): Promise<void> {
    const attempt = attemptFromHeaders(message.properties.headers) + 1;
    let result: RunResult<T>;
    try {
      const value = await this.#handler({
        message,
        scope: this.options.scope,
        key: undefined,
        fencingToken: 0,
        attempt,
        outcome: 'UNPROTECTED',
        signal: new AbortController().signal,
      });
      result = { outcome: 'UNPROTECTED', status: 'completed', result: value, storeError: undefined };
    } catch (error) {
      result = { outcome: 'UNPROTECTED', status: 'threw', error, storeError: undefined };
    }
    const action = decideAction(result, this.#policy, attempt, this.#idempotency.options.isRetryable);
    await this.#apply(message, subject, 'UNPROTECTED', action);
  }

  async #apply(
    message: ConsumeMessage,
    subject: DeliverySubject,
    outcome: RunOutcome | undefined,
    action: BrokerAction,
  ): Promise<void> {
    if (action.kind === 'ack') {
      if (this.#settle(message, subject, (c) => c.ack(message))) {
        this.#emit('acked', { ...subject, reason: action.reason, outcome });
      }
      return;
    }
    const headers: Record<string, unknown> = {
      ...(message.properties.headers as Record<string, unknown> | undefined),
      [HEADERS.attempt]: action.attempt,
      [HEADERS.outcome]: outcome ?? NO_CLAIM_OUTCOME,
    };
    delete headers[HEADERS.publishId];
    if (action.kind === 'delay') {
      const tier = this.topology.delayTiers.find((t) => t.delayMs === action.delayMs)!;
      headers[HEADERS.retryReason] = action.reason;
      headers[HEADERS.delayMs] = action.delayMs;
      if (action.error !== undefined) headers[HEADERS.error] = action.error;
      else delete headers[HEADERS.error];
      const published = await this.#republish(message, subject, '', tier.queue, headers, action.delayMs);
      if (published && this.#settle(message, subject, (c) => c.ack(message))) {
        this.#emit('retried', {
          ...subject,
          reason: action.reason,
          outcome: outcome ?? 'UNPROTECTED',
          attempt: action.attempt,
          delayMs: action.delayMs,
          wantedDelayMs: action.wantedDelayMs,
          delayQueue: tier.queue,
          error: action.error,
        });
      }
      return;
    }
    const reason: DeadLetterReason = action.reason;
    headers[HEADERS.deadLetterReason] = reason;
    headers[HEADERS.error] = action.error;
    headers[HEADERS.scope] = this.options.scope;
    if (subject.key !== undefined) headers[HEADERS.key] = subject.key;
    headers[HEADERS.originalQueue] = this.options.queue;
    const { deadLetterExchange: exchange, deadLetterRoutingKey: routingKey } = this.topology;
    const published = await this.#republish(
      message,
      subject,
      exchange,
      routingKey,
      headers,
      this.options.delayTiersMs[0]!,
    );
    if (published && this.#settle(message, subject, (c) => c.ack(message))) {
      this.#emit('deadLettered', {
        ...subject,
        reason,
        outcome,
        attempt: action.attempt,
        error: action.error,
        exchange,
        routingKey,
      });
    }
  }

  /**
   * Publishes a copy and waits for the broker's confirm. On failure the delivery is requeued after
   * `requeueAfterMs` (never an immediate requeue loop), and false is returned.
   */
  async #republish(
    message: ConsumeMessage,
    subject: DeliverySubject,
    exchange: string,
    routingKey: string,
    headers: Record<string, unknown>,
    requeueAfterMs: number,
  ): Promise<boolean> {
    try {
      const publisher = this.#publisher ?? (await this.#openPublisher());
      await publisher.publish(exchange, routingKey, message.content, republishOptions(message, headers));
      return true;
    } catch (error) {
      this.#emit('publishFailed', { ...subject, error, exchange, routingKey });
      await sleep(requeueAfterMs, this.#stopping.signal);
      this.#requeue(message, subject, 'publish-failed', error);
      return false;
    }
  }

  #requeue(message: ConsumeMessage, subject: DeliverySubject, reason: RequeueReason, error: unknown): void {
    if (this.#settle(message, subject, (c) => c.nack(message, false, true))) {
      this.#emit('requeued', { ...subject, reason, error });
    }
  }

  /**
   * Acks or nacks a delivery at most once (a second settle of one delivery tag is a channel error in
   * AMQP 0-9-1). False (and `settleFailed`) when the channel refused it: it is closed, and the broker
   * redelivers the message.
   */
  #settle(message: ConsumeMessage, subject: DeliverySubject, settle: (c: ConsumeChannel) => void): boolean {
    if (this.#settled.has(message)) return false;
    this.#settled.add(message);
    const channel = this.#channel;
    try {
      if (!channel) throw new Error('The consume channel is closed; the broker redelivers the message');
      settle(channel);
      return true;
    } catch (error) {
      this.#emit('settleFailed', { ...subject, error });
      return false;
    }
  }

  /** Fails closed: stops consuming and probes the store until it answers, then consumes again. */
  #pause(error: unknown): void {
    if (this.#state !== 'running') return;
    this.#state = 'paused';
    this.#pausedAt = performance.now();
    this.#emit('paused', { queue: this.options.queue, error });
    void this.#cancel();
    void this.#probeAndResume();
  }

  async #probeAndResume(): Promise<void> {
    const signal = this.#stopping.signal;
    for (let probe = 1; ; probe++) {
      await sleep(computeBackoffMs(probe, this.options.storeProbeBackoff), signal);
      if (signal.aborted || this.#state !== 'paused') return;
      try {
        await this.#idempotency.store.ping();
        break;
      } catch (error) {
        this.#emit('storeProbeFailed', { queue: this.options.queue, probe, error });
      }
    }
    await this.#cancelling;
    if (this.#state !== 'paused' || !this.#channel) return;
    try {
      await this.#consume();
    } catch {
      // The consume channel closed meanwhile: its 'close' handler reports it.
      return;
    }
    this.#emit('resumed', {
      queue: this.options.queue,
      pausedMs: Math.round(performance.now() - this.#pausedAt),
    });
  }

  /** Emits an event; a listener that throws cannot change what the broker sees. */
  #emit<K extends keyof IdempotentConsumerEvents>(name: K, ...payload: IdempotentConsumerEvents[K]): void {
    if (this.listenerCount(name) === 0) return;
    try {
      (this.emit as (n: K, ...p: IdempotentConsumerEvents[K]) => boolean)(name, ...payload);
    } catch {
      // A listener's bug must not change the broker action.
    }
  }
}

/**
 * Creates an {@link IdempotentConsumer}; call `start()` on it to consume.
 * @throws {@link InvalidOptionError} when an option is out of range or a dependency is missing.
 */
export function createIdempotentConsumer<T>(
  dependencies: IdempotentConsumerDependencies,
  options: IdempotentConsumerOptions,
  handler: RabbitHandler<T>,
): IdempotentConsumer<T> {
  return new IdempotentConsumer<T>(dependencies, options, handler);
}
