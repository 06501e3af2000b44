import { EventEmitter } from 'node:events';
import { performance } from 'node:perf_hooks';
import { type Message, ReceiveMessageCommand } from '@aws-sdk/client-sqs';
import { computeBackoffMs, InvalidOptionError } from '@idempotent-consumer/core';
import { processBatch } from './batch-processing';
import type { ProcessedMessage } from './disposition';
import { toVisibilitySeconds } from './message-attributes';
import { SqsMessageProcessor } from './message-processor';
import { resolveSqsOptions, type SqsMessageHandler } from './options';
import type { SqsPollerEvents } from './poller-events';
import { resolvePollerOptions, type SqsPollerOptions } from './poller-options';
import { deleteBatcher, MAX_SQS_BATCH_ENTRIES, type SqsBatcher, visibilityBatcher } from './sqs-batcher';
import type { SqsDependencies } from './sqs-client';
import { StoreGate } from './store-gate';

/**
 * An SQS consumer loop of its own that runs a handler effectively once per idempotency key, for
 * applications that do not use sqs-consumer. It long-polls `ReceiveMessage` (up to 10 messages, never more
 * than `concurrency` in flight), claims each received batch in one round trip, runs the handlers (standard
 * queues concurrently, each FIFO message group in order), and maps every outcome to SQS (DESIGN.md, SQS
 * column):
 * - completed or DUPLICATE: deleted with `DeleteMessageBatch`;
 * - CONFLICT: visibility set to the holder's remaining lease; retryable handler error: released, visibility
 *   set from a backoff on `ApproximateReceiveCount` (both with `ChangeMessageVisibilityBatch`);
 * - attempts exhausted, non-retryable, PAYLOAD_MISMATCH, missing key: recorded FAILED and sent to the
 *   dead-letter queue then deleted, or left to the queue's redrive policy (option `deadLetter`);
 * - store unavailable: nothing is deleted, the message stays invisible, and polling pauses until a ping of
 *   the store succeeds (`storeUnavailable` / `storeRecovered` events).
 * While a handler runs, each lease heartbeat extends the message's visibility timeout to the lease's
 * remaining time. Batch requests are checked entry by entry (`Failed`), and failures are `sqsError` events.
 *
 * @example
 * ```ts
 * const poller = new IdempotentSqsPoller({ idempotency, sqs }, { queueUrl, concurrency: 20,
 *   deadLetter: { queueUrl: dlqUrl } }, async (message, { fencingToken }) => charge(message, fencingToken));
 * poller.on('deadLettered', (p) => log.warn(p.deadLetterReason, p.error));
 * poller.start();
 * process.once('SIGTERM', () => poller.stop());
 * ```
 */
export class IdempotentSqsPoller<T = unknown> extends EventEmitter<SqsPollerEvents<T>> {
  readonly #deps: SqsDependencies;
  readonly #queueUrl: string;
  readonly #processor: SqsMessageProcessor<T>;
  readonly #settings: ReturnType<typeof resolvePollerOptions>;
  readonly #deletes: SqsBatcher<{ ReceiptHandle: string }>;
  readonly #visibility: SqsBatcher<{ ReceiptHandle: string; VisibilityTimeout: number }>;
  readonly #receivedAt = new WeakMap<Message, number>();
  readonly #tasks = new Set<Promise<unknown>>();
  #gate: StoreGate | undefined;
  #loop: Promise<void> | undefined;
  #abort = new AbortController();
  #stopping = false;
  #inFlight = 0;
  #capacityWaiters: (() => void)[] = [];

  /** @throws {@link InvalidOptionError} when a dependency is missing or an option is out of range. */
  constructor(dependencies: SqsDependencies, options: SqsPollerOptions, handler: SqsMessageHandler<T>) {
    super({ captureRejections: false });
    if (!dependencies?.idempotency || !dependencies.sqs) {
      throw new InvalidOptionError('IdempotentSqsPoller needs { idempotency, sqs }');
    }
    if (typeof handler !== 'function') throw new InvalidOptionError('handler must be a function');
    this.#deps = dependencies;
    const resolved = resolveSqsOptions(options);
    this.#queueUrl = resolved.queueUrl;
    const leaseMs = resolved.leaseMs ?? dependencies.idempotency.options.leaseMs;
    this.#settings = resolvePollerOptions(options, leaseMs);
    this.#deletes = deleteBatcher(dependencies.sqs, this.#queueUrl, this.#settings.batchWindowMs);
    this.#visibility = visibilityBatcher(dependencies.sqs, this.#queueUrl, this.#settings.batchWindowMs);
    this.#processor = new SqsMessageProcessor<T>(dependencies, resolved, handler, {
      changeVisibility: async (message, seconds) => {
        await this.#changeVisibility(message, seconds);
      },
      beforeExecute: (message, lease) => this.#coverLease(message, lease),
      onError: (error, message) => this.#emit('sqsError', { operation: 'process', error, message }),
    });
  }

  /** Whether the poller is running (between `start()` and the end of `stop()`). */
  get running(): boolean {
    return this.#loop !== undefined;
  }

  /** Messages received and not yet settled. */
  get inFlight(): number {
    return this.#inFlight;
  }

  /** Whether polling is paused because the store is unavailable. */
  get paused(): boolean {
    return this.#gate?.closed ?? false;
  }

  /** Starts polling; a no-op while already running. Returns the poller. */
  start(): this {
    if (this.#loop) return this;
    this.#stopping = false;
    this.#abort = new AbortController();
    this.#gate = new StoreGate(this.#deps.idempotency.store, this.#settings.storeProbeIntervalMs, {
      onClosed: (error) => this.#emit('storeUnavailable', { error }),
      onOpened: (downMs) => this.#emit('storeRecovered', { downMs }),
    });
    this.#loop = this.#run();
    return this;
  }

  /**
   * Stops gracefully: no new receive (a long poll in flight is aborted; messages SQS handed to an aborted
   * request come back when their visibility timeout lapses), waits for every in-flight message to finish
   * (handlers included) and for every delete and visibility change to be sent, then emits `stopped`.
   */
  async stop(): Promise<void> {
    const loop = this.#loop;
    if (!loop) return;
    this.#stopping = true;
    this.#abort.abort();
    this.#gate?.dispose();
    for (const wake of this.#capacityWaiters.splice(0)) wake();
    await loop;
    while (this.#tasks.size > 0) await Promise.allSettled([...this.#tasks]);
    await this.#deletes.drain();
    await this.#visibility.drain();
    this.#loop = undefined;
    this.#emit('stopped');
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
            QueueUrl: this.#queueUrl,
            MaxNumberOfMessages: Math.min(MAX_SQS_BATCH_ENTRIES, this.#settings.concurrency - this.#inFlight),
            WaitTimeSeconds: this.#settings.waitTimeSeconds,
            VisibilityTimeout: this.#settings.visibilityTimeoutSeconds,
            MessageAttributeNames: ['All'],
            MessageSystemAttributeNames: ['ApproximateReceiveCount', 'MessageGroupId', 'SentTimestamp'],
          }),
          { abortSignal: signal },
        );
        messages = out.Messages ?? [];
        receiveErrors = 0;
      } catch (error) {
        if (this.#stopping) break;
        receiveErrors += 1;
        this.#emit('sqsError', { operation: 'ReceiveMessage', error });
        await sleep(computeBackoffMs(receiveErrors, this.#settings.receiveErrorBackoff), signal);
        continue;
      }
      if (messages.length > 0) this.#dispatch(messages);
    }
  }

  #dispatch(messages: Message[]): void {
    this.#inFlight += messages.length;
    const now = performance.now();
    for (const m of messages) this.#receivedAt.set(m, now);
    this.#emit('received', messages);
    const task = processBatch(this.#processor, messages, async (processed) => {
      try {
        await this.#settle(processed);
      } finally {
        this.#inFlight -= 1;
        for (const wake of this.#capacityWaiters.splice(0)) wake();
      }
    })
      .catch((error) => this.#emit('sqsError', { operation: 'process', error }))
      .finally(() => this.#tasks.delete(task));
    this.#tasks.add(task);
  }

  async #settle(processed: ProcessedMessage<T>): Promise<void> {
    if (processed.storeUnavailable) this.#gate?.close(processed.error);
    this.#emit('processed', processed);
    if (processed.deadLetterReason) this.#emit('deadLettered', processed);
    const d = processed.disposition;
    const receipt = processed.message.ReceiptHandle;
    if (!receipt) return;
    if (d.action === 'delete') {
      try {
        await this.#deletes.add({ ReceiptHandle: receipt });
        this.#emit('deleted', processed);
      } catch (error) {
        this.#emit('sqsError', { operation: 'DeleteMessageBatch', error, message: processed.message });
      }
    } else if (d.action === 'change-visibility') {
      if (await this.#changeVisibility(processed.message, d.visibilityTimeoutSeconds)) {
        this.#emit('visibilityChanged', processed);
      }
    }
  }

  /** Sets a message's visibility timeout (batched). Resolves false (after an `sqsError`) when SQS refused. */
  async #changeVisibility(message: Message, seconds: number): Promise<boolean> {
    if (!message.ReceiptHandle) return false;
    try {
      await this.#visibility.add({ ReceiptHandle: message.ReceiptHandle, VisibilityTimeout: seconds });
      return true;
    } catch (error) {
      this.#emit('sqsError', { operation: 'ChangeMessageVisibilityBatch', error, message });
      return false;
    }
  }

  /**
   * Before a handler runs: when the visibility timeout of the receive could lapse before the first lease
   * heartbeat extends it (a FIFO message that waited for its group, or a visibility timeout shorter than the
   * heartbeat interval), extend it to the lease now.
   */
  async #coverLease(message: Message, leaseMs: number): Promise<void> {
    const receivedAt = this.#receivedAt.get(message) ?? performance.now();
    const heartbeatMs = Math.min(
      this.#deps.idempotency.options.heartbeatIntervalMs,
      Math.max(1, Math.floor(leaseMs / 3)),
    );
    const elapsed = performance.now() - receivedAt;
    if (elapsed + heartbeatMs + 1000 < this.#settings.visibilityTimeoutSeconds * 1000) return;
    await this.#changeVisibility(message, Math.max(1, toVisibilitySeconds(leaseMs)));
  }

  #capacity(): Promise<void> {
    if (this.#inFlight < this.#settings.concurrency) return Promise.resolve();
    return new Promise<void>((resolve) => {
      this.#capacityWaiters.push(() => {
        if (this.#stopping || this.#inFlight < this.#settings.concurrency) resolve();
        else this.#capacity().then(resolve);
      });
    });
  }

  #emit<K extends keyof SqsPollerEvents<T>>(name: K, ...args: SqsPollerEvents<T>[K]): void {
    if (this.listenerCount(name) === 0) return;
    try {
      (this.emit as (n: K, ...a: SqsPollerEvents<T>[K]) => boolean)(name, ...args);
    } catch {
      // A listener's bug must not change what happens to a message.
    }
  }
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    }
    signal.addEventListener('abort', done, { once: true });
  });
}
