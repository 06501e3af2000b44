import { performance } from 'node:perf_hooks';
import { type Message, ReceiveMessageCommand } from '@aws-sdk/client-sqs';
import { computeBackoffMs, InvalidOptionError } from '@idempotent-consumer/core';
import { AdapterLog, StopSignal, StoreGate, TypedEventEmitter } from '@idempotent-consumer/core/kit';
import { processBatch } from './batch-processing';
import type { SqsIdempotencyEvents } from './events';
import type { SqsHandler } from './handler';
import {
  RECEIVED_MESSAGE_ATTRIBUTES,
  RECEIVED_SYSTEM_ATTRIBUTES,
  toVisibilitySeconds,
} from './message-attributes';
import { SqsMessagePort } from './message-port';
import { type ResolvedSqsIdempotencyOptions, resolveSqsOptions } from './options';
import { resolvePollerOptions, type SqsPollerOptions } from './poller-options';
import type { ProcessedMessage } from './processed';
import { reportProcessed, sourceOf, sqsRequestOf, subjectOf } from './report';
import { deleteBatcher, MAX_SQS_BATCH_ENTRIES, type SqsBatcher, visibilityBatcher } from './sqs-batcher';
import type { SqsIdempotencyDependencies } from './sqs-client';

/**
 * An SQS consumer loop of its own that runs a handler effectively once per idempotency key, for
 * applications that do not use sqs-consumer. It long-polls `ReceiveMessage` (up to 10 messages, never more
 * than `concurrency` in flight), claims each received batch in one round trip, runs the handlers (standard
 * queues concurrently, each FIFO message group in order), and carries out each message's {@link Decision}
 * (docs/design.md#outcome-to-broker-action, SQS column):
 * - completed or DUPLICATE: deleted with `DeleteMessageBatch`;
 * - CONFLICT: visibility set to the holder's remaining lease; retryable handler error: released, visibility
 *   set from a backoff on `ApproximateReceiveCount` (both with `ChangeMessageVisibilityBatch`);
 * - attempts exhausted, non-retryable, PAYLOAD_MISMATCH, missing or invalid key: recorded FAILED and sent
 *   to the dead-letter queue then deleted, or left to the queue's redrive policy (option `deadLetter`);
 * - store unavailable: nothing is deleted, the message stays invisible, and polling pauses until a ping of
 *   the store succeeds (`storeUnavailable` / `storeRecovered` events).
 * While a handler runs, each lease heartbeat extends the message's visibility timeout to the lease's
 * remaining time. Batch requests are checked entry by entry (`Failed`); failures are `brokerError` events.
 *
 * @example
 * ```ts
 * const poller = new IdempotentSqsPoller({ idempotency, sqs }, { queueUrl, concurrency: 20,
 *   deadLetter: { queueUrl: dlqUrl } }, async ({ message, fencingToken }) => charge(message, fencingToken));
 * poller.on('deadLettered', (e) => log.warn(e.reason, e.error));
 * await poller.start(); // rejects with TopologyMismatchError when the queue has no RedrivePolicy
 * process.once('SIGTERM', () => poller.stop());
 * ```
 */
export class IdempotentSqsPoller<T = unknown> extends TypedEventEmitter<SqsIdempotencyEvents> {
  readonly #deps: SqsIdempotencyDependencies;
  readonly #options: ResolvedSqsIdempotencyOptions;
  readonly #port: SqsMessagePort<T>;
  readonly #settings: ReturnType<typeof resolvePollerOptions>;
  /** This run's deletes and visibility changes (made by `start()`, with {@link #requests}'s signal). */
  #deletes!: SqsBatcher<{ ReceiptHandle: string }>;
  #visibility!: SqsBatcher<{ ReceiptHandle: string; VisibilityTimeout: number }>;
  readonly #receivedAt = new WeakMap<Message, number>();
  /** Messages received and not yet settled. */
  readonly #inFlight = new Set<Message>();
  /** Messages `stop()` gave up on: nothing more is sent to SQS for them, nor reported. */
  readonly #abandoned = new WeakSet<Message>();
  /** Messages whose decision is being carried out (its delete or visibility change sent), not yet reported. */
  readonly #settling = new Set<Message>();
  readonly #tasks = new Set<Promise<unknown>>();
  readonly #log: AdapterLog;
  #unwatchRedis: (() => void) | undefined;
  /** Stops closing the gate on the runner's unanswered store calls (from `start()` to `stop()`). */
  #unfollowStore: (() => void) | undefined;
  #gate: StoreGate | undefined;
  #loop: Promise<void> | undefined;
  #starting: Promise<this> | undefined;
  #abort = new StopSignal();
  /**
   * Aborts this run's SQS requests still unanswered when `stop()` resolves (deletes, visibility changes,
   * dead-letter copies): their messages were abandoned, and a request SQS never answers would keep its
   * socket, and so the process, alive until the SDK's socket timeout (15 minutes).
   */
  #requests = new StopSignal();
  #stopping = false;
  #capacityWaiters: (() => void)[] = [];

  /** @throws {@link @idempotent-consumer/core!InvalidOptionError} when a dependency is missing or an option is out of range. */
  constructor(dependencies: SqsIdempotencyDependencies, options: SqsPollerOptions, handler: SqsHandler<T>) {
    super();
    if (!dependencies?.idempotency || !dependencies.sqs) {
      throw new InvalidOptionError('IdempotentSqsPoller needs { idempotency, sqs }');
    }
    if (typeof handler !== 'function') throw new InvalidOptionError('handler must be a function');
    this.#deps = dependencies;
    this.#options = resolveSqsOptions(options);
    const queueUrl = this.#options.queueUrl;
    const leaseMs = this.#options.leaseMs ?? dependencies.idempotency.options.leaseMs;
    this.#settings = resolvePollerOptions(options, leaseMs);
    this.#log = AdapterLog.for(dependencies.idempotency, dependencies.logger, `the poller of ${queueUrl}`, {
      queueUrl,
    });
    const poller = this;
    this.#port = new SqsMessagePort<T>(dependencies, this.#options, handler, {
      changeVisibility: async (message, seconds) => {
        await this.#changeVisibility(message, seconds);
      },
      beforeExecute: (message, lease) => this.#coverLease(message, lease),
      coversBeforeRun: (lease) => this.#visibilityLapsesFirst(0, lease),
      abandoned: (message) => this.#abandoned.has(message),
      onError: (operation, error, message) => this.#brokerError(operation, error, message),
      emit: (name, ...payload) => void this.emit(name, ...payload),
      log: this.#log,
      get gate() {
        return poller.#gate!;
      },
      get stopping() {
        return poller.#abort.signal;
      },
      closing: () => this.#requests.signal,
    });
  }

  /** Whether the poller is running (between `start()` and the end of `stop()`). */
  get running(): boolean {
    return this.#loop !== undefined;
  }

  /** Messages received and not yet settled. */
  get inFlight(): number {
    return this.#inFlight.size;
  }

  /** Whether polling is paused because the store is unavailable. */
  get paused(): boolean {
    return this.#gate?.closed ?? false;
  }

  /**
   * Starts polling; a no-op while already running. First checks that the store answers one ping
   * ({@link IdempotentSqsPoller.checkStore}; under the runner's `storeFailureMode: 'open'` a store that does
   * not answer is only logged), then, once, that the dead-letter mode can work (`GetQueueAttributes`): with `deadLetter: 'redrive-policy'` (the default) the queue must have a
   * `RedrivePolicy`, with `{ queueUrl }` that queue must exist. Resolves with the poller once polling has
   * started, or once a `stop()` called meanwhile ended the start (nothing is polled then).
   * @throws {@link @idempotent-consumer/core!TopologyMismatchError} (`TOPOLOGY_MISMATCH`) when the dead-letter mode cannot work: the
   * poller does not start. {@link SqsOperationError} when SQS did not answer the check (retryable).
   * {@link @idempotent-consumer/core!StoreUnavailableError} when the store does not answer and the runner
   * fails closed.
   */
  start(): Promise<this> {
    this.#starting ??= this.#start().finally(() => {
      this.#starting = undefined;
    });
    return this.#starting;
  }

  /**
   * Sends one ping to the idempotency store (bounded by its command timeout); `start()` calls it first.
   * The same check as the RabbitMQ consumer's and the Kafka wrappers' `checkStore()`.
   * @throws {@link @idempotent-consumer/core!StoreUnavailableError} naming the queue and where Redis is (host and port).
   */
  checkStore(): Promise<void> {
    return StoreGate.check(this.#deps.idempotency.store, this.#log.where);
  }

  /**
   * {@link IdempotentSqsPoller.start}'s steps. The abort signal of this run is made first: a `stop()`
   * meanwhile aborts it, which aborts the dead-letter check in flight (an SQS endpoint that never answers
   * must not hold `stop()`, nor keep its socket open) and the store check's wait for a Redis client still
   * connecting (up to 5 s otherwise), and the start then ends without polling.
   */
  async #start(): Promise<this> {
    if (this.#loop) return this;
    this.#stopping = false;
    this.#abort = new StopSignal();
    const { signal } = this.#abort;
    // From here to stop(): the runner's warnings reach this poller's logger, the Redis client is watched.
    this.#log.open();
    this.#unwatchRedis ??= StoreGate.watchRedisErrors(this.#deps.idempotency.store, this.#log);
    const release = () => {
      this.#unwatchRedis?.();
      this.#unwatchRedis = undefined;
      this.#log.close();
    };
    try {
      await StoreGate.checkAtStart(this.#deps.idempotency, this.#log, signal);
      if (!signal.aborted) await this.#port.verifyDeadLetter(signal);
    } catch (error) {
      release();
      // stop() was called meanwhile: the check it aborted failed because of it, no error of start().
      if (signal.aborted) return this;
      throw error;
    }
    if (signal.aborted) {
      release();
      return this;
    }
    if (this.#loop) return this;
    const queueUrl = this.#options.queueUrl;
    this.#requests = new StopSignal();
    const { sqs } = this.#deps;
    const { batchWindowMs } = this.#settings;
    this.#deletes = deleteBatcher(sqs, queueUrl, batchWindowMs, this.#requests.signal);
    this.#visibility = visibilityBatcher(sqs, queueUrl, batchWindowMs, this.#requests.signal);
    this.#gate = new StoreGate(
      this.#deps.idempotency.store,
      { storeProbeBackoff: this.#options.storeProbeBackoff, log: this.#log },
      {
        onStoreUnavailable: ({ error }) => this.emit('storeUnavailable', { queueUrl, error }),
        onStoreRecovered: ({ downMs }) => this.emit('storeRecovered', { queueUrl, downMs }),
      },
    );
    // An extension or a write after a handler the store does not answer stops the polling at once.
    this.#unfollowStore = this.#gate.follow(this.#deps.idempotency);
    this.#loop = this.#run();
    this.emit('started', { queueUrl });
    return this;
  }

  /**
   * Stops gracefully: no new receive (a long poll in flight is aborted; messages SQS handed to an aborted
   * request come back when their visibility timeout lapses), and a message waiting for the holder of its
   * key (the `conflictWaitMs` wait of a CONFLICT) stops waiting at once: it settles as a CONFLICT still
   * held does (its visibility set to `min(remaining lease, maxConflictDelayMs)`, sent with the last
   * visibility changes below), so `stop()` does not wait `conflictWaitMs` for it. No handler starts after
   * `stop()` was called: a message whose handler had not started (a FIFO message waiting behind its group,
   * one whose claim, CONFLICT wait or visibility change before its handler was answered after `stop()`) is
   * made visible again at once (`change-visibility`/`stopping`), the claim it got given back without an
   * attempt spent. Then it waits up to `stopTimeoutMs` for every in-flight message to finish (handlers
   * included). Messages still running
   * then are abandoned: each is reported `settled` with `leave`/`abandoned`, nothing more is sent to SQS
   * for it, not even a dead-letter copy (its handler may still finish and record its outcome, which its
   * redelivery then meets), and it comes back after its visibility timeout. One whose handler had not
   * started (its claim, a claim of its CONFLICT wait, or a visibility change before its handler answered
   * late) never starts, and the claim it got is released for its redelivery. A message whose decision
   * is made and whose delete or visibility change is already queued or sent is not abandoned then.
   * Last, the pending deletes and visibility changes are sent, waited for what is left of
   * `stopTimeoutMs` but at least 1 s: a message whose request SQS answered by then is reported `settled`
   * with its decision; one whose request is not answered by then is not waited for and is abandoned (and
   * counted) too, reported `settled` with `leave`/`abandoned` (an answer after that is not reported: one
   * `settled` per message), and unless that request still lands, it becomes visible again when its
   * visibility timeout lapses (a completed one is then a `DUPLICATE`, deleted without running). So
   * `stop()` resolves within about `stopTimeoutMs` + 1 s, whatever SQS does. Before it resolves, every
   * request of the poller SQS has not answered (such a delete or visibility change, or the dead-letter
   * copy of a message abandoned while it was sent) is aborted: their messages are abandoned, and a socket
   * left waiting would keep the process alive after `stop()` until the SDK's socket timeout.
   * Emits `stopped` and resolves with the number abandoned. Called during `start()`, it aborts the start's
   * dead-letter check (`GetQueueAttributes`) and its store check's wait for a Redis client still
   * connecting, and waits for the start to end (at most a ping already sent: the store's command
   * timeout); if polling had not started, it resolves with `{ abandoned: 0 }` and emits nothing.
   */
  async stop(): Promise<{ abandoned: number }> {
    if (this.#starting) {
      // A start() under way takes no further step and its dead-letter check is aborted (see #start).
      this.#abort.abort();
      await this.#starting.catch(() => {});
    }
    const loop = this.#loop;
    if (!loop) return { abandoned: 0 };
    this.#stopping = true;
    this.#abort.abort();
    this.#gate?.dispose();
    for (const wake of this.#capacityWaiters.splice(0)) wake();
    const stopStarted = performance.now();
    const drained = (async () => {
      await loop;
      while (this.#tasks.size > 0) await Promise.allSettled([...this.#tasks]);
    })();
    const ended = await StopSignal.within(drained, this.#settings.stopTimeoutMs);
    // Still running: abandoned. Those whose delete or visibility change is sent wait for it below.
    let abandoned =
      ended === 'timeout' ? this.#abandon([...this.#inFlight].filter((m) => !this.#settling.has(m))) : 0;
    // The last deletes and visibility changes get what is left of stopTimeoutMs, at least 1 s:
    // an SQS endpoint that does not answer cannot hold stop() (what is not sent becomes visible again).
    const leftMs = this.#settings.stopTimeoutMs - (performance.now() - stopStarted);
    await StopSignal.within(
      Promise.all([this.#deletes.drain(), this.#visibility.drain()]),
      Math.max(leftMs, StopSignal.FINAL_STEP_MIN_MS),
    );
    // Not answered by then: not waited for, so abandoned too (reported once, here; its late answer is not).
    abandoned += this.#abandon([...this.#settling]);
    // Every message is settled or abandoned now: what this run sent and SQS has not answered (a delete, a
    // visibility change, a dead-letter copy of a message abandoned mid-copy) is aborted, so no socket of
    // it keeps the process alive after stop() (an aborted delete brings a completed message back as a
    // DUPLICATE, deleted then without running).
    this.#requests.abort();
    this.#loop = undefined;
    this.#unwatchRedis?.();
    this.#unwatchRedis = undefined;
    this.#unfollowStore?.();
    this.#unfollowStore = undefined;
    this.#log.close();
    this.emit('stopped', { queueUrl: this.#options.queueUrl, abandoned });
    return { abandoned };
  }

  /**
   * Marks `messages` abandoned and reports each settled with `leave`/`abandoned`, counted as the `leave`
   * broker action in telemetry unless its decision was counted before ({@link SqsMessagePort.abandon});
   * returns how many.
   */
  #abandon(messages: readonly Message[]): number {
    for (const message of messages) {
      this.#abandoned.add(message);
      this.#inFlight.delete(message);
      this.#settling.delete(message);
      this.#port.abandon(message);
      if (!this.hasListeners('settled')) continue;
      const prepared = this.#port.prepare(message);
      const key = prepared.kind === 'keyed' ? prepared.request.key : undefined;
      const subject = subjectOf(this.#options.queueUrl, this.#options.scope, message, {
        key,
        outcome: undefined,
        attempt: 0,
      });
      const decision = { action: 'leave', reason: 'abandoned' } as const;
      this.emit('settled', { ...subject, decision });
    }
    return messages.length;
  }

  async #run(): Promise<void> {
    const signal = this.#abort.signal;
    let receiveErrors = 0;
    while (!this.#stopping) {
      await this.#gate!.waitUntilOpen(signal);
      if (this.#stopping) break;
      await this.#capacity();
      if (this.#stopping) break;
      let messages: Message[];
      try {
        const out = await this.#deps.sqs.send(
          new ReceiveMessageCommand({
            QueueUrl: this.#options.queueUrl,
            MaxNumberOfMessages: Math.min(MAX_SQS_BATCH_ENTRIES, this.#settings.concurrency - this.inFlight),
            WaitTimeSeconds: this.#settings.waitTimeSeconds,
            VisibilityTimeout: this.#settings.visibilityTimeoutSeconds,
            MessageAttributeNames: [...RECEIVED_MESSAGE_ATTRIBUTES],
            MessageSystemAttributeNames: [...RECEIVED_SYSTEM_ATTRIBUTES],
          }),
          { abortSignal: signal },
        );
        messages = out.Messages ?? [];
        receiveErrors = 0;
      } catch (error) {
        if (this.#stopping) break;
        receiveErrors += 1;
        this.#brokerError('ReceiveMessage', error);
        await StopSignal.sleep(computeBackoffMs(receiveErrors, this.#settings.receiveErrorBackoff), signal);
        continue;
      }
      if (messages.length > 0) this.#dispatch(messages);
    }
  }

  #dispatch(messages: Message[]): void {
    const now = performance.now();
    for (const m of messages) {
      this.#inFlight.add(m);
      this.#receivedAt.set(m, now);
    }
    this.emit('received', { queueUrl: this.#options.queueUrl, messages });
    const task = processBatch(
      this.#port,
      messages,
      async (processed) => {
        try {
          await this.#settle(processed);
        } finally {
          this.#inFlight.delete(processed.message);
          for (const wake of this.#capacityWaiters.splice(0)) wake();
        }
      },
      (message) => this.#abandoned.has(message),
    )
      .catch((error) => this.#brokerError('process', error))
      .finally(() => this.#tasks.delete(task));
    this.#tasks.add(task);
  }

  async #settle(processed: ProcessedMessage<T>): Promise<void> {
    const { message } = processed;
    if (this.#abandoned.has(message)) return; // stop() gave up on it and reported it
    const request = sqsRequestOf(processed);
    this.#settling.add(message);
    if (message.ReceiptHandle && request === 'delete') {
      try {
        await this.#deletes.add({ ReceiptHandle: message.ReceiptHandle });
      } catch (error) {
        this.#brokerError('DeleteMessageBatch', error, message);
      }
    } else if (typeof request === 'number') {
      await this.#changeVisibility(message, request);
    }
    // stop() gave up waiting for that answer and reported the message abandoned: one `settled` only.
    if (this.#abandoned.has(message)) return;
    this.#settling.delete(message);
    reportProcessed(this, this.#options.queueUrl, this.#options.scope, processed);
    if (processed.decision.action === 'leave' && processed.decision.reason === 'store-unavailable') {
      void this.#visibleOnceStoreAnswers(message);
    }
  }

  /**
   * A message left invisible because the store did not answer its claim: made visible again (visibility
   * 0) once the store gate opens, so it runs at once rather than when its visibility timeout lapses, a lease
   * or more after Redis answered. Not once `stop()` was called (the gate is then disposed), nor when its
   * visibility timeout has lapsed by then (SQS hands it out again anyway, with another receipt handle).
   */
  async #visibleOnceStoreAnswers(message: Message): Promise<void> {
    if (!(await this.#gate?.waitUntilOpen(this.#abort.signal))) return;
    const receivedAt = this.#receivedAt.get(message) ?? 0;
    if (performance.now() - receivedAt >= this.#settings.visibilityTimeoutSeconds * 1000) return;
    await this.#changeVisibility(message, 0);
  }

  /** Sets a message's visibility timeout (batched); a refusal is a `brokerError`. Skips abandoned messages. */
  async #changeVisibility(message: Message, seconds: number): Promise<void> {
    if (!message.ReceiptHandle || this.#abandoned.has(message)) return;
    try {
      await this.#visibility.add({ ReceiptHandle: message.ReceiptHandle, VisibilityTimeout: seconds });
    } catch (error) {
      this.#brokerError('ChangeMessageVisibilityBatch', error, message);
    }
  }

  #brokerError(operation: string, error: unknown, message?: Message): void {
    const queueUrl = this.#options.queueUrl;
    this.emit('brokerError', { queueUrl, operation, error, source: message && sourceOf(queueUrl, message) });
  }

  /**
   * Before a handler runs: when the visibility timeout of the receive could lapse before the first lease
   * heartbeat extends it (a FIFO message that waited for its group, or a visibility timeout shorter than the
   * heartbeat interval), extend it to the lease now.
   */
  async #coverLease(message: Message, leaseMs: number): Promise<void> {
    const receivedAt = this.#receivedAt.get(message) ?? performance.now();
    if (!this.#visibilityLapsesFirst(performance.now() - receivedAt, leaseMs)) return;
    await this.#changeVisibility(message, Math.max(1, toVisibilitySeconds(leaseMs)));
  }

  /** Whether the receive's visibility timeout could lapse before the first lease heartbeat, `elapsedMs` after it. */
  #visibilityLapsesFirst(elapsedMs: number, leaseMs: number): boolean {
    const heartbeatMs = Math.min(
      this.#deps.idempotency.options.heartbeatIntervalMs,
      Math.max(1, Math.floor(leaseMs / 3)),
    );
    return elapsedMs + heartbeatMs + 1000 >= this.#settings.visibilityTimeoutSeconds * 1000;
  }

  #capacity(): Promise<void> {
    if (this.inFlight < this.#settings.concurrency) return Promise.resolve();
    return new Promise<void>((resolve) => {
      this.#capacityWaiters.push(() => {
        if (this.#stopping || this.inFlight < this.#settings.concurrency) resolve();
        else this.#capacity().then(resolve);
      });
    });
  }
}
