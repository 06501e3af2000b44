import type { Message } from '@aws-sdk/client-sqs';
import {
  type ClaimReply,
  describeError,
  type Handler,
  type Idempotency,
  InvalidKeyError,
  MissingKeyError,
  type RunOptions,
  type RunRequest,
  type RunResult,
  StoreUnavailableError,
} from '@idempotent-consumer/core';
import { extendHandlerContext } from '@idempotent-consumer/core/kit';
import { type DeadLetterRoute, resolveDeadLetterRoute } from './dead-letter-route';
import { carryOutDeadLetter } from './dead-letter-step';
import { type Decision, type DecisionPolicy, decide, type MessageResult } from './decide';
import type { SqsHandler } from './handler';
import { receiveCount, toVisibilitySeconds } from './message-attributes';
import type { ResolvedSqsIdempotencyOptions } from './options';
import type { ProcessedMessage } from './processed';
import type { SqsDependencies } from './sqs-client';
import { runWithoutKey } from './unprotected-run';

/** What a {@link SqsMessageProcessor} needs from the form that runs it (poller or sqs-consumer wiring). */
export interface ProcessorHooks {
  /** Sets a message's visibility timeout (lease heartbeats). Must not reject: it reports its own errors. */
  changeVisibility(message: Message, visibilityTimeoutSeconds: number): Promise<void>;
  /** Runs after a claim was acquired, before the handler (the poller extends a visibility about to lapse). */
  beforeExecute?(message: Message, leaseMs: number): Promise<void>;
  /** An SQS or unexpected error that does not stop processing. */
  onError(operation: string, error: unknown, message: Message): void;
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
    const runner = dependencies.idempotency.options;
    this.#policy = {
      retryBackoff: options.retryBackoff,
      maxConflictDelayMs: options.maxConflictDelayMs,
      maxAttempts: options.maxAttempts ?? runner.maxAttempts,
      isRetryable: runner.isRetryable,
    };
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
   * @throws {@link @idempotent-consumer/core!TopologyMismatchError} when it cannot work; {@link SqsOperationError} when SQS did not answer.
   */
  verifyDeadLetter(): Promise<DeadLetterRoute> {
    this.#route ??= resolveDeadLetterRoute(
      this.#deps.sqs,
      this.#options.queueUrl,
      this.#options.deadLetter,
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
   * Claims the keyed messages of a batch in one round trip (`Idempotency.claimMany`). Resolves with one
   * reply per keyed message, `{ storeUnavailable: error }` when the store did not answer (fail closed), or
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
        this.runOptions,
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
    let result: MessageResult<T>;
    try {
      result = await this.#run(keyed, claimed);
    } catch (error) {
      this.#hooks.onError('process', error, message);
      result = { kind: 'error', error, receiveCount: receiveCount(message) };
    }
    return this.#finish(keyed, result);
  }

  /** A message that is not run (its FIFO group is blocked, or the batch claim met a store that is down). */
  notRun(keyed: KeyedMessage, storeError?: unknown): Promise<ProcessedMessage<T>> {
    const rc = receiveCount(keyed.message);
    return this.#finish(
      keyed,
      storeError === undefined
        ? { kind: 'fifo-blocked', receiveCount: rc }
        : { kind: 'store-unavailable', error: storeError, receiveCount: rc },
    );
  }

  async #run(keyed: KeyedMessage, claimed: ClaimReply | undefined): Promise<MessageResult<T>> {
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
        return {
          kind: 'run',
          result: await runWithoutKey(this.#options.scope, this.#bind(message)),
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
          return { kind: 'store-unavailable', error, receiveCount: rc };
        }
        // Fail open: through the runner, which claims again and, while the store still does not answer,
        // emits `failOpen` and runs the handler unprotected.
        return { kind: 'run', result: await this.#runThroughRunner(message, request), receiveCount: rc };
      }
    }
    if (reply.outcome === 'CONFLICT' && this.#options.conflictWaitMs > 0) {
      reply = await this.#waitForHolder(message, request, reply);
    }
    if (reply.outcome !== 'ACQUIRED' && reply.outcome !== 'ACQUIRED_STALE') {
      return { kind: 'run', result: this.#idempotency.settle<T>(reply), receiveCount: rc };
    }
    await this.#hooks.beforeExecute?.(message, this.leaseMs);
    try {
      const executed = await this.#idempotency.execute<T>(request, reply, this.#bind(message), {
        ...this.runOptions,
        onHeartbeat: this.#heartbeat(message),
      });
      return { kind: 'run', result: executed, receiveCount: rc };
    } catch (error) {
      // The store did not answer the start of a reservation (a batch claim): nothing ran.
      if (error instanceof StoreUnavailableError)
        return { kind: 'store-unavailable', error, receiveCount: rc };
      throw error;
    }
  }

  #runThroughRunner(message: Message, request: RunRequest): Promise<RunResult<T>> {
    return this.#idempotency.run<T>(request, this.#bind(message), {
      ...this.runOptions,
      conflictWaitMs: 0,
      onHeartbeat: this.#heartbeat(message),
    });
  }

  /** The core handler for one message: the user's handler with the SQS context. */
  #bind(message: Message): Handler<T> {
    const queueUrl = this.#options.queueUrl;
    return (context) => this.#handler(extendHandlerContext(context, { message, queueUrl }));
  }

  /**
   * Moves the visibility timeout with the lease. Not awaited: the lease keeper awaits its callback, and
   * `execute` awaits the keeper before it writes COMPLETED, so an awaited SQS call would widen the window
   * between the handler's side effect and its record. The hook reports its own errors.
   */
  #heartbeat(message: Message): RunOptions['onHeartbeat'] {
    if (!this.#options.extendVisibility) return undefined;
    return (info) => {
      void this.#hooks.changeVisibility(
        message,
        Math.max(1, toVisibilitySeconds(info.leaseExpiresAtMs - info.serverTimeMs)),
      );
    };
  }

  /**
   * Waits up to `conflictWaitMs` for the holder of a CONFLICT to reach its outcome (the runner's bounded
   * wait), after extending the message's visibility timeout to cover the wait. Resolves with the reply it
   * ended with; the CONFLICT itself when the store stopped answering meanwhile.
   */
  async #waitForHolder(message: Message, request: RunRequest, conflict: ClaimReply): Promise<ClaimReply> {
    const waitMs = this.#options.conflictWaitMs;
    await this.#hooks.changeVisibility(message, toVisibilitySeconds(waitMs) + 1);
    try {
      return await this.#idempotency.waitForOutcome(request, { ...this.runOptions, conflictWaitMs: waitMs });
    } catch (error) {
      if (error instanceof StoreUnavailableError) return conflict;
      throw error;
    }
  }

  /** Decides, carries out a dead-letter decision, and describes the message. */
  async #finish(keyed: KeyedMessage, input: MessageResult<T>): Promise<ProcessedMessage<T>> {
    const { message } = keyed;
    const key = keyed.request?.key;
    const described = describe(input);
    let decision: Decision = decide(input, this.#policy);
    const base = { message, key, ...described };
    if (decision.action !== 'dead-letter') return { ...base, decision };
    const step = await carryOutDeadLetter(this.#deps.sqs, () => this.verifyDeadLetter(), message, decision, {
      outcome: described.outcome,
      key,
      scope: this.#options.scope,
    });
    if (!step.ok) {
      this.#hooks.onError('dead-letter', step.error, message);
      decision = { action: 'leave', reason: 'dead-letter-failed' };
      return { ...base, error: step.error, decision };
    }
    return { ...base, error: decision.error ?? described.error, decision, deadLetter: step.delivery };
  }
}

/** The fields of a processed message that come from what happened, before the decision. */
function describe<T>(input: MessageResult<T>): Omit<ProcessedMessage<T>, 'message' | 'key' | 'decision'> {
  const none = { outcome: undefined, attempt: 0, handler: 'not-run' as const, storeUnavailable: false };
  switch (input.kind) {
    case 'fifo-blocked':
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
            `the store did not take the ${r.status} write of the handler's outcome (attempt ${r.attempt}); the record stays IN_PROGRESS until its lease expires`,
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
        leaseLostDuring: !r.handlerStarted ? 'start' : r.handlerCompleted ? 'write' : 'heartbeat',
      };
  }
}
