import type { Message } from '@aws-sdk/client-sqs';
import {
  type ClaimReply,
  type DuplicateResult,
  describeError,
  type Handler,
  type Idempotency,
  InvalidKeyError,
  MissingKeyError,
  type RunOptions,
  type RunRequest,
  type RunResult,
  StoreUnavailableError,
  type WrittenClaim,
} from '@idempotent-consumer/core';
import {
  AdapterLog,
  callUnprotected,
  extendHandlerContext,
  giveBackUnrun,
  leaseLostDuring,
  type MessageSpan,
  type MessageTelemetry,
  NOOP_MESSAGE_SPAN,
  recordCompletionLate,
  runUnprotected,
  type StoreGate,
  UnprotectedRuns,
  unreadableDuplicateOf,
  writtenClaimOf,
} from '@idempotent-consumer/core/kit';
import { type DeadLetterRoute, resolveDeadLetterRoute } from './dead-letter-route';
import { carryOutDeadLetter } from './dead-letter-step';
import { type Decision, type DecisionPolicy, decide, type MessageResult } from './decide';
import { DeadLetterRefusedError } from './errors';
import type { SqsHandler, SqsHandlerContext } from './handler';
import { receiveCount, toVisibilitySeconds } from './message-attributes';
import type { ResolvedSqsIdempotencyOptions } from './options';
import type { ProcessedMessage } from './processed';
import type { SqsDependencies } from './sqs-client';
import { type SqsAttributeCarrier, sqsTelemetry } from './telemetry';

/** What a {@link SqsMessageProcessor} needs from the form that runs it (poller or sqs-consumer wiring). */
export interface ProcessorHooks {
  /** Sets a message's visibility timeout (lease heartbeats). Must not reject: it reports its own errors. */
  changeVisibility(message: Message, visibilityTimeoutSeconds: number): Promise<void>;
  /** Runs after a claim was acquired, before the handler (the poller extends a visibility about to lapse). */
  beforeExecute?(message: Message, leaseMs: number): Promise<void>;
  /**
   * Whether `beforeExecute` sends an SQS request for a message received just now (the poller: a visibility
   * timeout the first lease heartbeat could outlast). A batch is then claimed as reservations, so a crash
   * during that request spends no attempt. @defaultValue never
   */
  coversBeforeRun?(leaseMs: number): boolean;
  /** An SQS or unexpected error that does not stop processing. */
  onError(operation: string, error: unknown, message: Message): void;
  /**
   * Whether `stop()` gave up on the message (the poller's `stopTimeoutMs`): its dead-letter decision is
   * then not carried out, as nothing more may be sent to SQS for it. @defaultValue never
   */
  abandoned?(message: Message): boolean;
  /**
   * A store call the processor absorbed failed (`markDeadLettered`, `release`), or a DUPLICATE's stored
   * result could not be decoded (`settle`: the message is deleted as a duplicate).
   */
  onStoreError?(operation: string, error: unknown, message: Message): void;
  /**
   * The consumer's store gate, read for each give-back: a claim given back unrun (`giveBack`) while the
   * store does not answer is given back again once the gate opens, until the consumer stops (`stopping`).
   * @defaultValue none (one try; an unanswered give-back lapses with its lease)
   */
  storeGate?(): StoreGate | undefined;
  /** Where the first message without a key, or with an invalid one, is reported. @defaultValue none */
  readonly log?: AdapterLog;
  /**
   * The signal that aborts when the consumer stops: the `signal` of unprotected handlers (which hold no
   * claim whose loss could abort it) aborts with it. @defaultValue none (only `handlerTimeoutMs` aborts it)
   */
  stopping?(): AbortSignal | undefined;
  /**
   * The signal that aborts the SQS requests the processor sends itself (the dead-letter copy, and a
   * dead-letter check it repeats), read for each message: the sqs-consumer wiring's `close()`, and the
   * poller's `stop()` once it gave up waiting (its run's), so an SQS endpoint that never answers cannot
   * hold the message's processing, nor a socket after the consumer stopped. An aborted copy leaves the
   * message (`dead-letter-failed`). @defaultValue none
   */
  closing?(): AbortSignal | undefined;
}

/** A message with its idempotency request, or the reason it has none. */
export type KeyedMessage =
  | { readonly message: Message; readonly request: RunRequest }
  | { readonly message: Message; readonly request: undefined; readonly error?: unknown };

/**
 * Runs one message through the runner and turns what happened into a {@link Decision} (`decide`), shared by
 * both forms: claims it (or takes a claim made for its batch), waits a bounded time on a CONFLICT, runs the
 * handler under the lease, and carries out a dead-letter decision (copy or redrive). Deletes and the final
 * visibility change are the caller's, so the poller can batch them and sqs-consumer can delete what the
 * wiring returns. `process` never rejects.
 */
export class SqsMessageProcessor<T> {
  readonly #deps: SqsDependencies;
  readonly #options: ResolvedSqsIdempotencyOptions;
  readonly #handler: SqsHandler<T>;
  readonly #hooks: ProcessorHooks;
  readonly #policy: DecisionPolicy;
  readonly #telemetry: MessageTelemetry<Message, SqsAttributeCarrier>;
  readonly #log: AdapterLog;
  /**
   * Dead-letter decisions of unprotected runs whose copy failed, by `MessageId`: the next receive sends
   * the copy without running the handler again.
   */
  readonly #unprotectedRuns = new UnprotectedRuns<Extract<Decision, { action: 'dead-letter' }>>();
  /**
   * The lease heartbeats' visibility changes of a message not answered yet (they are not awaited while
   * the handler runs): `process` waits for them, so its final request (delete, retry or conflict
   * visibility, the redrive policy's 0) is sent after them and cannot be overtaken by one on the way to SQS.
   */
  readonly #heartbeatChanges = new WeakMap<Message, Promise<unknown>>();
  /** The spans of the messages being processed (until their decision), for {@link SqsMessageProcessor.abandon}. */
  readonly #spans = new Map<Message, MessageSpan>();
  /** Messages whose broker action was counted: their decision, or `leave` when `stop()` abandoned them first. */
  readonly #counted = new WeakSet<Message>();
  #route: Promise<DeadLetterRoute> | undefined;

  constructor(
    dependencies: SqsDependencies,
    options: ResolvedSqsIdempotencyOptions,
    handler: SqsHandler<T>,
    hooks: ProcessorHooks,
  ) {
    this.#deps = dependencies;
    this.#options = options;
    this.#handler = handler;
    this.#hooks = hooks;
    this.#log = hooks.log ?? AdapterLog.silent;
    const runner = dependencies.idempotency.options;
    this.#policy = {
      retryBackoff: options.retryBackoff,
      maxConflictDelayMs: options.maxConflictDelayMs,
      maxAttempts: options.maxAttempts ?? runner.maxAttempts,
      isRetryable: runner.isRetryable,
    };
    this.#telemetry = sqsTelemetry(options.queueUrl, options.telemetry);
  }

  get #idempotency(): Idempotency {
    return this.#deps.idempotency;
  }

  /** The per-call overrides passed to the runner (`RunOverrides` of the kit). */
  get runOptions(): RunOptions {
    return this.#options.overrides;
  }

  /** The lease of these messages, in milliseconds. */
  get leaseMs(): number {
    return this.#options.leaseMs ?? this.#idempotency.options.leaseMs;
  }

  /**
   * Checks once that the dead-letter mode can work ({@link resolveDeadLetterRoute}) and remembers the
   * route; a failed check is not remembered, so the next call asks SQS again.
   * @param signal - aborts the check's request (the poller's `stop()` during `start()`); only the first
   *   caller's signal counts, so pass one only where nothing else checks at the same time.
   * @throws {@link @idempotent-consumer/core!TopologyMismatchError} when it cannot work; {@link SqsOperationError} when SQS did not answer or the check was aborted.
   */
  verifyDeadLetter(signal?: AbortSignal): Promise<DeadLetterRoute> {
    this.#route ??= resolveDeadLetterRoute(
      this.#deps.sqs,
      this.#options.queueUrl,
      this.#options.deadLetter,
      signal,
    ).catch((error: unknown) => {
      this.#route = undefined;
      throw error;
    });
    return this.#route;
  }

  /** The idempotency request of a message, or `request: undefined` when it has none. */
  keyed(message: Message): KeyedMessage {
    let key: string | undefined;
    let payload: ReturnType<ResolvedSqsIdempotencyOptions['payload']>;
    try {
      key = this.#options.idempotencyKey(message);
      if (key === undefined || key === '') return { message, request: undefined };
      payload = this.#options.payload(message);
    } catch (error) {
      return { message, request: undefined, error };
    }
    const scope = this.#options.scope;
    return { message, request: payload === undefined ? { scope, key } : { scope, key, payload } };
  }

  /**
   * Claims the keyed messages of a batch in one round trip (`Idempotency.claimMany`). The claims count their
   * attempt at once (`reserve: false`), as `Idempotency.run`'s do: each handler starts right after the
   * reply (the poller receives no more messages than it has free slots, and only a FIFO group's first
   * message is claimed here), so no `start` call per message is needed, and a claim given back unrun
   * (`giveBack`) returns its attempt. Reservations (counted by `start`) when the hooks' `coversBeforeRun`
   * says an SQS request comes between the claim and each handler. Resolves with one reply per keyed message, `{ storeUnavailable: error }` when the store did not answer (fail closed), or
   * `undefined` when the batch cannot be claimed at once (an invalid key, fail open): each message is then
   * claimed on its own.
   */
  async claimBatch(
    keyed: readonly KeyedMessage[],
  ): Promise<Map<Message, ClaimReply> | { readonly storeUnavailable: unknown } | undefined> {
    const withKey = keyed.filter((k): k is KeyedMessage & { request: RunRequest } => k.request !== undefined);
    if (withKey.length === 0) return new Map();
    try {
      const replies = await this.#idempotency.claimMany(
        withKey.map((k) => k.request),
        // Counted at once, unless a visibility change is awaited before each handler (see the hook).
        { ...this.runOptions, reserve: this.#hooks.coversBeforeRun?.(this.leaseMs) === true },
      );
      return new Map(withKey.map((k, i) => [k.message, replies[i]!]));
    } catch (error) {
      if (error instanceof StoreUnavailableError && this.#idempotency.options.storeFailureMode === 'closed') {
        return { storeUnavailable: error };
      }
      return undefined;
    }
  }

  /** Processes one message (see the class description). `claimed`: the reply of a batch claim. */
  async process(keyed: KeyedMessage, claimed?: ClaimReply): Promise<ProcessedMessage<T>> {
    const { message } = keyed;
    const span = this.#startSpan(message);
    return span.run(async () => {
      const held = this.#heldDecision(message);
      if (held) {
        // An unprotected run whose dead-letter copy failed: send the copy, do not run the handler again.
        // A claim the batch claim made for it (the store answers again) runs no handler: given back, so it
        // costs no attempt and does not hold the key IN_PROGRESS until its lease lapses.
        await this.giveBack(keyed, claimed);
        const input: MessageResult<T> = {
          kind: 'run',
          result: { outcome: 'UNPROTECTED', status: 'threw', error: held.error, storeError: undefined },
          receiveCount: receiveCount(message),
        };
        return this.#finishTraced(keyed, input, span, held);
      }
      let result: MessageResult<T>;
      try {
        result = await this.#run(keyed, claimed, span);
      } catch (error) {
        this.#hooks.onError('process', error, message);
        result = { kind: 'error', error, receiveCount: receiveCount(message) };
      }
      if (result.kind === 'run') span.result(result.result, keyed.request?.key);
      const processed = await this.#finishTraced(keyed, result, span);
      await this.#heartbeatsAnswered(message);
      return processed;
    });
  }

  /**
   * Waits until SQS answered every lease-heartbeat visibility change sent for `message` (they never reject),
   * so the caller's final request for it is sent after them: a heartbeat's change landing after a retry's
   * would hide the message for the rest of the lease instead of the backoff, or after a redrive-policy 0
   * hide it again; one landing after the delete fails.
   */
  async #heartbeatsAnswered(message: Message): Promise<void> {
    const pending = this.#heartbeatChanges.get(message);
    if (pending === undefined) return;
    await pending;
    this.#heartbeatChanges.delete(message);
  }

  /**
   * Gives back a claim whose handler will not run (`Idempotency.release`, the runner's contract for an
   * interrupted batch): a claim of the batch claim, or a claim a CONFLICT wait ended with, of a message
   * `stop()` abandoned, a claim whose start the store did not answer, and a claim a failed claim or wait
   * had written and could not give back (`StoreUnavailableError.writtenClaim`). The record is RELEASED without an
   * attempt spent, so the redelivery runs instead of meeting a CONFLICT until the lease lapses, and is not
   * `ACQUIRED_STALE` with an attempt spent on a handler that never ran. Anything but an acquired claim is
   * ignored. Never rejects: a give-back the store does not answer is a `storeError` (`release`), and is
   * made again each time the store gate opens (the kit's `giveBackUnrun`) until the consumer stops; it
   * resolves after the first try, or at once while the gate is closed.
   */
  async giveBack(keyed: KeyedMessage, reply: ClaimReply | WrittenClaim | undefined): Promise<void> {
    if (!keyed.request) return;
    await giveBackUnrun(this.#idempotency, keyed.request, reply, {
      gate: this.#hooks.storeGate?.(),
      signal: this.#hooks.stopping?.(),
      onStoreError: (error) => this.#hooks.onStoreError?.('release', error, keyed.message),
    });
  }

  /**
   * A handler that completed whose COMPLETED write the store did not take (`recorded: false`: it did not
   * answer through the runner's `writeAttempts`). The message is still deleted (its handler completed); the
   * store gate closes now (as the caller's settle does for any unrecorded write: polling pauses until a
   * ping answers, whatever `storeFailureMode`), and the write is handed to the kit's
   * `recordCompletionLate`: tried each time the gate opens until the store takes it (a redelivery of the
   * key is then a `DUPLICATE`, not an `ACQUIRED_STALE` run once the lease lapsed) or refuses it
   * (`LEASE_LOST`), or the consumer stops (`stopping`: the record then lapses with its lease). Each failed
   * try is a `storeError` (`complete`). Not awaited. `storeError`: what the message's `storeError` says.
   */
  #recordCompletionLate(keyed: KeyedMessage, run: RunResult<T>, storeError: unknown): void {
    if (!keyed.request) return;
    const gate = this.#hooks.storeGate?.();
    gate?.close(storeError);
    void recordCompletionLate(this.#idempotency, keyed.request, run, {
      gate,
      // Whatever storeFailureMode (as the pause above): an unanswered try closes the gate again, so the
      // write is tried once more when it opens.
      closeGate: 'always',
      signal: this.#hooks.stopping?.(),
      onStoreError: (error) => this.#hooks.onStoreError?.('complete', error, keyed.message),
    });
  }

  /**
   * A message that is not run: its FIFO group is blocked (`fifo-blocked`), the consumer is stopping
   * (`stopping`: see {@link SqsMessageProcessor.stopping}), or the batch claim met a store that is down
   * (`{ storeUnavailable }`). A claim it had is the caller's to give back.
   */
  notRun(
    keyed: KeyedMessage,
    why: 'fifo-blocked' | 'stopping' | { readonly storeUnavailable: unknown },
  ): Promise<ProcessedMessage<T>> {
    const rc = receiveCount(keyed.message);
    const span = this.#startSpan(keyed.message);
    return span.run(() =>
      this.#finishTraced(
        keyed,
        typeof why === 'string'
          ? { kind: why, receiveCount: rc }
          : { kind: 'store-unavailable', error: why.storeUnavailable, receiveCount: rc },
        span,
      ),
    );
  }

  /**
   * Whether the consumer is stopping (the hooks' `stopping` signal aborted: the poller's `stop()`, the
   * wiring's `close()`): no handler starts then. A message whose handler has not started is made visible
   * again at once (`change-visibility`/`stopping`), its claim given back, so another consumer takes it
   * instead of this one starting work while it shuts down (work `stop()` would give up on at
   * `stopTimeoutMs`, left running after the process that awaited `stop()` exits).
   */
  get stopping(): boolean {
    return this.#hooks.stopping?.()?.aborted === true;
  }

  /**
   * `stop()` gave up on `message` (the poller reports it `settled` with `leave`/`abandoned`): counts the
   * `leave` broker action on its span (a span started and ended here for a message whose processing never
   * started), unless its decision was counted already (made before: its delete or visibility change handed to the
   * poller's batcher, or its dead-letter copy sent).
   * Its decision, when it comes later, is then not counted: one broker action per message, as the event.
   */
  abandon(message: Message): void {
    if (this.#counted.has(message)) return;
    this.#counted.add(message);
    const span = this.#spans.get(message);
    if (span) {
      span.brokerAction('leave');
      return;
    }
    const unstarted = this.#telemetry.start(message, this.#options.scope);
    unstarted.brokerAction('leave');
    unstarted.end();
  }

  #startSpan(message: Message): MessageSpan {
    const span = this.#telemetry.start(message, this.#options.scope);
    this.#spans.set(message, span);
    return span;
  }

  /**
   * `#finish`, then reports the decision to the message's telemetry (unless `stop()` abandoned the message
   * first: {@link SqsMessageProcessor.abandon} counted `leave`) and ends its span (status ERROR for an
   * unexpected error of this adapter).
   */
  async #finishTraced(
    keyed: KeyedMessage,
    input: MessageResult<T>,
    span: MessageSpan,
    held?: Extract<Decision, { action: 'dead-letter' }>,
  ): Promise<ProcessedMessage<T>> {
    const { message } = keyed;
    try {
      const processed = await this.#finish(keyed, input, held);
      if (!this.#counted.has(message)) {
        this.#counted.add(message);
        span.brokerAction(processed.decision.action);
      }
      span.end(input.kind === 'error' ? input.error : undefined);
      return processed;
    } finally {
      this.#spans.delete(message);
    }
  }

  async #run(
    keyed: KeyedMessage,
    claimed: ClaimReply | undefined,
    span: MessageSpan = NOOP_MESSAGE_SPAN,
  ): Promise<MessageResult<T>> {
    const { message } = keyed;
    const rc = receiveCount(message);
    const id = message.MessageId ?? '(no MessageId)';
    if (!keyed.request) {
      if ('error' in keyed && keyed.error !== undefined) {
        // The extractor threw (a malformed body, say): it would throw on every redelivery.
        const error = new InvalidKeyError(
          `the idempotency key extractor threw on SQS message ${id}: ${describeError(keyed.error)}`,
          { cause: keyed.error },
        );
        return { kind: 'invalid-key', error, receiveCount: rc };
      }
      if (this.#options.missingKey === 'process') {
        // Stopping: no handler starts (it is made visible again at once).
        if (this.stopping) return { kind: 'stopping', receiveCount: rc };
        if (rc > this.#policy.maxAttempts) {
          // Run on maxAttempts receives already, and the dead letter after the last was not carried out
          // (another consumer's, or a redrive that has not moved it yet): do not run it again.
          const error = new Error(
            `The handler already ran without protection on ${this.#policy.maxAttempts} receives (maxAttempts) of SQS message ${id}; not run again`,
          );
          return {
            kind: 'run',
            result: { outcome: 'UNPROTECTED', status: 'threw', error, storeError: undefined },
            receiveCount: rc,
          };
        }
        return {
          kind: 'run',
          result: await runUnprotected<T, SqsHandlerContext>(
            (context) => span.timeHandler(() => this.#handler(context)),
            {
              scope: this.#options.scope,
              key: undefined,
              fencingToken: 0,
              attempt: rc,
              outcome: 'UNPROTECTED',
              message,
              queueUrl: this.#options.queueUrl,
            },
            this.#hooks.stopping?.(),
            { handlerTimeoutMs: this.#handlerTimeoutMs() },
          ),
          receiveCount: rc,
        };
      }
      const error = new MissingKeyError(
        `SQS message ${id} has no idempotency key (scope ${this.#options.scope})`,
      );
      return { kind: 'missing-key', error, receiveCount: rc };
    }
    const request = keyed.request;
    let reply = claimed;
    if (!reply) {
      try {
        reply = await this.#idempotency.claim(request, this.runOptions);
      } catch (error) {
        if (error instanceof InvalidKeyError) return { kind: 'invalid-key', error, receiveCount: rc };
        if (!(error instanceof StoreUnavailableError)) throw error;
        if (this.#idempotency.options.storeFailureMode === 'closed') {
          // A claim the failed call had written, whose give-back inside the runner went unanswered too
          // (`writtenClaim`): given back once the store answers (the gate closes first, as the caller's
          // settle would), so the redelivery does not meet it as a CONFLICT until its lease lapses.
          const written = writtenClaimOf(error);
          if (written !== undefined) {
            this.#hooks.storeGate?.()?.close(error);
            await this.giveBack(keyed, written);
          }
          return { kind: 'store-unavailable', error, receiveCount: rc };
        }
        // Fail open: such a claim is given back first (one try), or the runner's claim met it as a CONFLICT.
        await this.giveBack(keyed, writtenClaimOf(error));
        // Fail open: through the runner, which claims again and, while the store still does not answer,
        // emits `failOpen` and runs the handler unprotected. Not once stop() gave up on it during the claim
        // (see the check before `execute`); there is no claim to give back.
        if (this.#hooks.abandoned?.(message)) return { kind: 'abandoned', receiveCount: rc };
        if (this.stopping) return { kind: 'stopping', receiveCount: rc };
        return {
          kind: 'run',
          result: await this.#runThroughRunner(message, request, span),
          receiveCount: rc,
        };
      }
    }
    if (reply.outcome === 'CONFLICT' && this.#options.conflictWaitMs > 0) {
      // After a batch claim the claim the wait ends with is a reservation, counted when its handler starts:
      // a visibility change is awaited first (below), and a crash during it must not spend an attempt.
      reply = await this.#waitForHolder(message, request, reply, claimed !== undefined);
      if (reply.outcome === 'ACQUIRED' || reply.outcome === 'ACQUIRED_STALE') {
        // The wait set the visibility timeout to only conflictWaitMs + 1 s, and the first heartbeat comes
        // a third of the lease after the handler starts: without this, SQS hands the message out again
        // while its handler runs.
        await this.#hooks.changeVisibility(message, Math.max(1, toVisibilitySeconds(this.leaseMs)));
      }
    }
    if (reply.outcome !== 'ACQUIRED' && reply.outcome !== 'ACQUIRED_STALE') {
      return { kind: 'run', result: this.#settle(message, reply), receiveCount: rc };
    }
    await this.#hooks.beforeExecute?.(message, this.leaseMs);
    if (this.#hooks.abandoned?.(message)) {
      // stop() gave up on it (and may have resolved) before its handler started: during its claim, its
      // CONFLICT wait, or a visibility change since. Checked here, after the last await before `execute`:
      // a handler started now would run after stop() with its visibility no longer extended, beside its
      // redelivery. None starts, and the claim is given back, or the redelivery would meet a CONFLICT
      // until its lease lapsed.
      await this.giveBack(keyed, reply);
      return { kind: 'abandoned', receiveCount: rc };
    }
    if (this.stopping) {
      // The consumer is stopping (its claim, a CONFLICT wait or the visibility change before the handler
      // answered after `stop()` was called): no handler starts. The claim is given back (no attempt
      // spent) and the message made visible again, so another consumer runs it at once.
      await this.giveBack(keyed, reply);
      return { kind: 'stopping', receiveCount: rc };
    }
    try {
      const executed = await this.#idempotency.execute<T>(request, reply, this.#bind(message, span), {
        ...this.runOptions,
        onHeartbeat: this.#heartbeat(message),
      });
      return { kind: 'run', result: executed, receiveCount: rc };
    } catch (error) {
      if (!(error instanceof StoreUnavailableError)) throw error;
      // The store did not answer the start of a reservation, or the one extension of a claim with less
      // than one heartbeat interval of its lease left: nothing ran. The gate closes (as the caller's settle
      // would) and the claim is given back once the store answers, so the redelivery neither meets it as a
      // CONFLICT nor finds an attempt spent and the record stale (Redis may have applied the start: the
      // give-back returns it).
      this.#hooks.storeGate?.()?.close(error);
      await this.giveBack(keyed, reply);
      return { kind: 'store-unavailable', error, receiveCount: rc };
    }
  }

  #runThroughRunner(message: Message, request: RunRequest, span: MessageSpan): Promise<RunResult<T>> {
    return this.#idempotency
      .run<T>(request, this.#bind(message, span), {
        ...this.runOptions,
        conflictWaitMs: 0,
        onHeartbeat: this.#heartbeat(message),
      })
      .catch((error: unknown) => this.#unreadableDuplicate(message, error));
  }

  /**
   * `Idempotency.settle` of a claim whose handler must not run; a DUPLICATE whose stored result this
   * version cannot decode is settled as a DUPLICATE all the same ({@link SqsMessageProcessor.#unreadableDuplicate}).
   */
  #settle(message: Message, reply: ClaimReply): RunResult<T> {
    try {
      return this.#idempotency.settle<T>(reply);
    } catch (error) {
      return this.#unreadableDuplicate(message, error);
    }
  }

  /**
   * A DUPLICATE whose stored result this version cannot decode (`UnreadableResultError`: a newer version's
   * encoding during a rolling upgrade, or corrupt bytes): the operation completed and a consumer never
   * needs the result, so the message is deleted as any DUPLICATE, with a `storeError` event (`settle`) and
   * one warning per consumer (the kit's `unreadableDuplicateOf`), instead of coming back after each
   * visibility timeout. @throws `error` itself when it is anything else.
   */
  #unreadableDuplicate(message: Message, error: unknown): DuplicateResult<never> {
    const duplicate = unreadableDuplicateOf(error, this.#log);
    if (!duplicate) throw error;
    this.#hooks.onStoreError?.('settle', error, message);
    return duplicate;
  }

  /**
   * The core handler for one message: the user's handler with the SQS context, timed by its telemetry.
   * Run unprotected by the runner (fail-open), its `signal` aborts when the consumer stops or
   * `handlerTimeoutMs` passes (the kit's `callUnprotected`; the runner's own never aborts).
   */
  #bind(message: Message, span: MessageSpan): Handler<T> {
    const queueUrl = this.#options.queueUrl;
    return (context) =>
      span.timeHandler(() =>
        context.outcome === 'UNPROTECTED'
          ? callUnprotected(
              (signal) => this.#handler({ ...context, message, queueUrl, signal }),
              this.#hooks.stopping?.(),
              this.#handlerTimeoutMs(),
              context,
            )
          : this.#handler(extendHandlerContext(context, { message, queueUrl })),
      );
  }

  /** The handler time limit of unprotected runs: this consumer's `handlerTimeoutMs`, else the runner's. */
  #handlerTimeoutMs(): number {
    return this.#options.overrides.handlerTimeoutMs ?? this.#idempotency.options.handlerTimeoutMs;
  }

  /** The held dead-letter decision of an unprotected run of `message`, if any. */
  #heldDecision(message: Message): Extract<Decision, { action: 'dead-letter' }> | undefined {
    if (this.#unprotectedRuns.size === 0 || message.MessageId === undefined) return undefined;
    return this.#unprotectedRuns.get(message.MessageId)?.held;
  }

  /**
   * Moves the visibility timeout with the lease. Not awaited: the lease keeper awaits its callback, and
   * `execute` awaits the keeper before it writes COMPLETED, so an awaited SQS call would widen the window
   * between the handler's side effect and its record. The hook reports its own errors. `process` waits for
   * the changes before it resolves ({@link SqsMessageProcessor.#heartbeatsAnswered}).
   */
  #heartbeat(message: Message): RunOptions['onHeartbeat'] {
    if (!this.#options.extendVisibility) return undefined;
    return (info) => {
      const change = this.#hooks.changeVisibility(
        message,
        Math.max(1, toVisibilitySeconds(info.leaseExpiresAtMs - info.serverTimeMs)),
      );
      const earlier = this.#heartbeatChanges.get(message);
      this.#heartbeatChanges.set(message, earlier ? Promise.all([earlier, change]) : change);
    };
  }

  /**
   * Waits up to `conflictWaitMs` for the holder of a CONFLICT to reach its outcome (the runner's bounded
   * wait), after setting the message's visibility timeout to cover the wait (which may shorten it: the
   * caller sets it to the lease when the wait ends with the claim). The consumer's stopping signal ends
   * the wait early (the poller's `stop()`): it then resolves with its last reply, a CONFLICT that settles
   * like any other (its visibility set to bring it back), so `stop()` does not wait `conflictWaitMs` for it.
   * Resolves with the reply it ended with; the CONFLICT itself when the store stopped answering meanwhile
   * (a claim the wait had written and could not give back, `StoreUnavailableError.writtenClaim`, is given
   * back first: {@link SqsMessageProcessor.giveBack}).
   */
  async #waitForHolder(
    message: Message,
    request: RunRequest,
    conflict: ClaimReply,
    reserve: boolean,
  ): Promise<ClaimReply> {
    const waitMs = this.#options.conflictWaitMs;
    await this.#hooks.changeVisibility(message, toVisibilitySeconds(waitMs) + 1);
    try {
      return await this.#idempotency.waitForOutcome(request, {
        ...this.runOptions,
        conflictWaitMs: waitMs,
        reserve,
        signal: this.#hooks.stopping?.(),
      });
    } catch (error) {
      if (!(error instanceof StoreUnavailableError)) throw error;
      // A claim the wait had written, whose give-back inside the runner went unanswered too: given back
      // (now, and again each time the store gate opens), or the redelivery met it as a CONFLICT until its
      // lease lapsed.
      await this.giveBack({ message, request }, writtenClaimOf(error));
      return conflict;
    }
  }

  /**
   * Decides (or takes the `held` decision), carries out a dead-letter decision (then marks a FAILED record
   * dead-lettered, so it is copied once) unless the message was abandoned (`leave`/`abandoned` then), and
   * describes the message.
   */
  async #finish(
    keyed: KeyedMessage,
    input: MessageResult<T>,
    held?: Extract<Decision, { action: 'dead-letter' }>,
  ): Promise<ProcessedMessage<T>> {
    const { message } = keyed;
    const key = keyed.request?.key;
    const described = describe(input);
    if (input.kind === 'run' && described.handler === 'completed' && described.storeUnavailable) {
      this.#recordCompletionLate(keyed, input.result, described.storeError);
    }
    let decision: Decision = held ?? decide(input, this.#policy);
    const base = { message, key, ...described };
    if (input.kind === 'missing-key' || input.kind === 'invalid-key') this.#warnKey(input.kind, input.error);
    else if (input.kind === 'run' && key === undefined && input.result.outcome === 'UNPROTECTED') {
      this.#warnKey('missing-key', undefined);
    }
    if (decision.action !== 'dead-letter') return { ...base, decision };
    const unprotected = described.outcome === 'UNPROTECTED' && message.MessageId !== undefined;
    if (this.#hooks.abandoned?.(message)) {
      // stop() reported it settled and promised nothing more goes to SQS for it: no copy, and the record
      // stays as the runner wrote it (FAILED, not dead-lettered), so its redelivery after the visibility
      // timeout is dead-lettered then. An unprotected run's decision is held, as for a failed copy.
      if (unprotected) this.#unprotectedRuns.hold(message.MessageId!, decision);
      return { ...base, decision: { action: 'leave', reason: 'abandoned' } };
    }
    const closing = this.#hooks.closing?.();
    const step = await carryOutDeadLetter(
      this.#deps.sqs,
      () => this.verifyDeadLetter(closing),
      message,
      decision,
      { outcome: described.outcome, key, scope: this.#options.scope },
      closing,
    );
    if (!step.ok) {
      this.#hooks.onError('dead-letter', step.error, message);
      if (step.error instanceof DeadLetterRefusedError) {
        // It comes back every visibility timeout, refused each time: a person must learn why, once.
        this.#log.warnOnce(
          'dead-letter-refused',
          `${step.error.message}. Further refusals are reported only by the brokerError event (operation dead-letter).`,
          { sqsCode: step.error.sqsCode, tooLarge: step.error.tooLarge },
        );
      }
      if (unprotected) this.#unprotectedRuns.hold(message.MessageId!, decision);
      decision = { action: 'leave', reason: 'dead-letter-failed' };
      return { ...base, error: step.error, decision };
    }
    if (unprotected && this.#unprotectedRuns.size > 0) this.#unprotectedRuns.forget(message.MessageId!);
    if (step.delivery.via === 'copy') await this.#markDeadLettered(keyed, decision.failedFencingToken);
    return { ...base, error: described.error ?? decision.error, decision, deadLetter: step.delivery };
  }

  /**
   * After the dead-letter copy of a FAILED record was sent: marks the record dead-lettered
   * (`Idempotency.markDeadLettered`), so a redelivery is deleted without a second copy. (With the redrive
   * policy SQS moves the message itself, and every receive until then must leave it visible: no mark.)
   */
  async #markDeadLettered(keyed: KeyedMessage, fencingToken: number | undefined): Promise<void> {
    if (fencingToken === undefined || !keyed.request) return;
    try {
      await this.#idempotency.markDeadLettered(keyed.request, { fencingToken });
    } catch (error) {
      this.#hooks.onStoreError?.('markDeadLettered', error, keyed.message);
    }
  }

  /** The first message without a key (or with an invalid one) is worth a warning; later ones only events. */
  #warnKey(kind: 'missing-key' | 'invalid-key', error: unknown): void {
    const queue = this.#options.queueUrl;
    if (kind === 'invalid-key') {
      this.#log.warnOnce(
        kind,
        `a message on ${queue} has an invalid idempotency key or payload (${describeError(error)}); it is dead-lettered (reason invalid-key). Further ones are reported only by the invalidKey event.`,
      );
      return;
    }
    const what =
      this.#options.missingKey === 'process'
        ? 'processed without idempotency (outcome UNPROTECTED)'
        : 'dead-lettered (reason missing-key)';
    this.#log.warnOnce(
      kind,
      `a message on ${queue} has no idempotency key (by default the idempotency-key message attribute); it is ${what}. Set the attribute when sending, or pass idempotencyKey. Further ones are reported only by the missingKey event.`,
    );
  }
}

/** The fields of a processed message that come from what happened, before the decision. */
function describe<T>(input: MessageResult<T>): Omit<ProcessedMessage<T>, 'message' | 'key' | 'decision'> {
  const none = { outcome: undefined, attempt: 0, handler: 'not-run' as const, storeUnavailable: false };
  switch (input.kind) {
    case 'fifo-blocked':
    case 'stopping':
    case 'abandoned':
      return none;
    case 'store-unavailable':
      return { ...none, error: input.error, storeUnavailable: true, storeError: input.error };
    case 'missing-key':
    case 'invalid-key':
    case 'error':
      return { ...none, error: input.error };
    case 'run':
      break;
  }
  const r = input.result;
  switch (r.outcome) {
    case 'UNPROTECTED':
      return r.status === 'completed'
        ? { outcome: r.outcome, attempt: 0, handler: 'completed', result: r.result, storeUnavailable: false }
        : { outcome: r.outcome, attempt: 0, handler: 'threw', error: r.error, storeUnavailable: false };
    case 'DUPLICATE':
      return { ...none, outcome: r.outcome, attempt: r.attempt, result: r.result };
    case 'CONFLICT':
    case 'PAYLOAD_MISMATCH':
      return { ...none, outcome: r.outcome, attempt: r.attempt };
    case 'FAILED':
      return { ...none, outcome: r.outcome, attempt: r.attempt, error: r.error };
    default:
      break;
  }
  const executed = { outcome: r.outcome, attempt: r.attempt };
  const unrecorded = (recorded: boolean) =>
    recorded
      ? { storeUnavailable: false }
      : {
          storeUnavailable: true,
          storeError: new StoreUnavailableError(
            r.status === 'completed'
              ? `the store did not take the completed write of the handler's outcome (attempt ${r.attempt}); it is written once the store answers again, else the record stays IN_PROGRESS until its lease expires`
              : `the store did not take the ${r.status} write of the handler's outcome (attempt ${r.attempt}); the record stays IN_PROGRESS until its lease expires`,
          ),
        };
  switch (r.status) {
    case 'completed':
      return { ...executed, handler: 'completed', result: r.result, ...unrecorded(r.recorded) };
    case 'released':
    case 'failed':
      return { ...executed, handler: 'threw', error: r.error, ...unrecorded(r.recorded) };
    case 'lease-lost':
      return {
        ...executed,
        handler: !r.handlerStarted ? 'not-run' : r.handlerCompleted ? 'completed' : 'threw',
        result: r.result,
        error: r.error,
        storeUnavailable: false,
        leaseLostDuring: leaseLostDuring(r),
      };
  }
}
