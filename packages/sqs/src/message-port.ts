import type { Message } from '@aws-sdk/client-sqs';
import type { ClaimReply, Payload, WrittenClaim } from '@idempotent-consumer/core';
import {
  AdapterLog,
  type BatchClaim,
  type CarriedOut,
  type MessageEnd,
  MessagePipeline,
  type MessagePort,
  type MessageSpan,
  type MessageTelemetry,
  type Prepared,
  type StoreGate,
  type SubjectFields,
  type WarningWords,
} from '@idempotent-consumer/core/kit';
import { type DeadLetterRoute, resolveDeadLetterRoute } from './dead-letter-route';
import { carryOutDeadLetter } from './dead-letter-step';
import { type Decision, type DecisionPolicy, toSqsDecision } from './decide';
import { DeadLetterRefusedError } from './errors';
import type { SqsIdempotencyEvents } from './events';
import type { SqsHandler } from './handler';
import { receiveCount, toVisibilitySeconds } from './message-attributes';
import type { ResolvedSqsIdempotencyOptions } from './options';
import type { DeadLetterDelivery, ProcessedMessage } from './processed';
import { sourceOf, subjectOf } from './report';
import type { SqsIdempotencyDependencies } from './sqs-client';
import { sqsTelemetry } from './telemetry';

/** What a {@link SqsMessagePort} needs from the form that runs it (poller or sqs-consumer wiring). */
export interface SqsPortHooks {
  /** Sets a message's visibility timeout. Must not reject: it reports its own errors. */
  changeVisibility(message: Message, visibilityTimeoutSeconds: number): Promise<void>;
  /** Runs after a claim was acquired, before the handler (the poller extends a visibility about to lapse). */
  beforeExecute?(message: Message, leaseMs: number): Promise<void>;
  /**
   * Whether `beforeExecute` sends an SQS request for a message received just now. A batch is then
   * claimed as reservations, so a crash during that request spends no attempt. @defaultValue never
   */
  coversBeforeRun?(leaseMs: number): boolean;
  /** An SQS error that does not stop processing. */
  onError(operation: string, error: unknown, message: Message): void;
  /** Whether `stop()` gave up on the message: nothing more is sent to SQS for it. @defaultValue never */
  abandoned?(message: Message): boolean;
  /** Emits an event of the consumer. */
  emit: <K extends keyof SqsIdempotencyEvents>(name: K, ...payload: SqsIdempotencyEvents[K]) => void;
  /** The consumer's store gate (read on each use). */
  readonly gate: StoreGate;
  readonly log?: AdapterLog;
  /** Aborts when the consumer stops: no handler starts, waits end, unprotected handlers see it (read on each use). */
  readonly stopping: AbortSignal;
  /** Aborts the SQS requests the port sends itself (the dead-letter copy and its check). */
  closing?(): AbortSignal | undefined;
}

/**
 * SQS as the pipeline's port, shared by the poller and the sqs-consumer wiring: reads the key (the
 * `idempotency-key` attribute, else nothing), moves the visibility timeout with the lease, and carries out
 * a dead letter (a copy, or the redrive policy). Deletes and the final visibility change are the caller's,
 * so the poller can batch them and sqs-consumer can delete what the wiring returns.
 */
export class SqsMessagePort<T> implements MessagePort<Message, ProcessedMessage<T>> {
  readonly #deps: SqsIdempotencyDependencies;
  readonly #options: ResolvedSqsIdempotencyOptions;
  readonly #hooks: SqsPortHooks;
  readonly #policy: DecisionPolicy;
  readonly #telemetry: MessageTelemetry<Message>;
  readonly #log: AdapterLog;
  readonly #pipeline: MessagePipeline<Message, T, ProcessedMessage<T>>;
  /**
   * The lease heartbeats' visibility changes not answered yet: the final request for a message is sent
   * after them, so one of them cannot land after it and hide the message again.
   */
  readonly #heartbeatChanges = new WeakMap<Message, Promise<unknown>>();
  /** The spans of the messages being processed, for {@link SqsMessagePort.abandon}. */
  readonly #spans = new Map<Message, MessageSpan>();
  /** Messages whose broker action was counted: their decision, or `leave` when `stop()` abandoned them. */
  readonly #counted = new WeakSet<Message>();
  #route: Promise<DeadLetterRoute> | undefined;

  constructor(
    dependencies: SqsIdempotencyDependencies,
    options: ResolvedSqsIdempotencyOptions,
    handler: SqsHandler<T>,
    hooks: SqsPortHooks,
  ) {
    this.#deps = dependencies;
    this.#options = options;
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
    this.#pipeline = new MessagePipeline<Message, T, ProcessedMessage<T>>({
      idempotency: dependencies.idempotency,
      handler: handler as never,
      port: this,
      // Read on each use: the poller makes a new gate and stop signal at every start().
      get gate() {
        return hooks.gate;
      },
      get stopping() {
        return hooks.stopping;
      },
      log: this.#log,
      telemetry: { start: (message, scope) => this.#startSpan(message, scope) },
      options: {
        missingKey: options.missingKey,
        overrides: { ...options.overrides, conflictWaitMs: options.conflictWaitMs },
        policy: this.#policy,
        lateCompletionClosesGate: true,
      },
    });
  }

  /** The lease of these messages, in milliseconds. */
  get leaseMs(): number {
    return this.#pipeline.leaseMs;
  }

  /** Whether the consumer is stopping: no handler starts then. */
  get stopping(): boolean {
    return this.#hooks.stopping.aborted;
  }

  /**
   * Checks once that the dead-letter mode can work and remembers the route; a failed check is not
   * remembered, so the next call asks SQS again.
   * @param signal - aborts the check's request; only the first caller's signal counts.
   * @throws {@link @idempotent-consumer/core!TopologyMismatchError} when it cannot work; {@link SqsOperationError} when SQS did not answer.
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

  /** Reads a message's key and payload. */
  prepare(message: Message): Prepared {
    return this.#pipeline.prepare(message);
  }

  /**
   * Claims the first messages of a batch in one round trip. The claims count their attempt at once, as
   * `Idempotency.run`'s do; reservations when `coversBeforeRun` says an SQS request comes first.
   */
  claimBatch(prepared: readonly Prepared[]) {
    return this.#pipeline.claimBatch(prepared, {
      reserve: this.#hooks.coversBeforeRun?.(this.leaseMs) === true,
    });
  }

  /** Processes one message (never rejects). `claimed`: its reply from a batch claim. */
  process(message: Message, prepared: Prepared, claimed?: ClaimReply): Promise<ProcessedMessage<T>> {
    const batch: BatchClaim | undefined = claimed && { reply: claimed };
    return this.#pipeline.process(message, prepared, batch);
  }

  /** Gives back a batch claim whose handler will not run (no attempt spent), again once the store answers. */
  giveBack(
    message: Message,
    prepared: Prepared,
    claim: ClaimReply | WrittenClaim | undefined,
  ): Promise<void> {
    return this.#pipeline.giveBack(message, prepared, claim);
  }

  /**
   * A message that is not run: its FIFO group is blocked, the consumer is stopping, or the batch claim
   * met a store that is down. A claim it had is the caller's to give back.
   */
  notRun(
    message: Message,
    prepared: Prepared,
    why: 'fifo-blocked' | 'stopping' | { readonly storeUnavailable: unknown },
  ): ProcessedMessage<T> {
    const span = this.#startSpan(message, this.#options.scope);
    const decision: Decision =
      typeof why === 'string'
        ? { action: 'change-visibility', reason: why, visibilityTimeoutSeconds: 0 }
        : { action: 'leave', reason: 'store-unavailable' };
    const error = typeof why === 'string' ? undefined : why.storeUnavailable;
    if (error !== undefined) this.#hooks.gate.close(error, message);
    const key = prepared.kind === 'keyed' ? prepared.request.key : undefined;
    this.#count(message, span, decision);
    span.end();
    return { message, key, outcome: undefined, attempt: 0, error, decision };
  }

  /**
   * `stop()` gave up on `message`: counts the `leave` broker action on its span, unless its decision was
   * counted already. Its decision, when it comes later, is then not counted.
   */
  abandon(message: Message): void {
    if (this.#counted.has(message)) return;
    const span = this.#spans.get(message);
    if (span) {
      this.#count(message, span, { action: 'leave', reason: 'abandoned' });
      return;
    }
    const unstarted = this.#telemetry.start(message, this.#options.scope);
    this.#count(message, unstarted, { action: 'leave', reason: 'abandoned' });
    unstarted.end();
  }

  scopeOf(): string {
    return this.#options.scope;
  }

  keyOf(message: Message): string | undefined {
    return this.#options.idempotencyKey(message);
  }

  payloadOf(message: Message): Payload | undefined {
    return this.#options.payload(message);
  }

  handlerFields(message: Message): object {
    return { message, queueUrl: this.#options.queueUrl };
  }

  subject(message: Message, fields: SubjectFields): object {
    return subjectOf(this.#options.queueUrl, fields.scope, message, fields);
  }

  storeError(operation: string, error: unknown, message: Message | undefined): object {
    const queueUrl = this.#options.queueUrl;
    return { queueUrl, operation, error, source: message && sourceOf(queueUrl, message) };
  }

  warningWords(): WarningWords {
    return {
      where: `on ${this.#options.queueUrl}`,
      unacknowledged: 'the message comes back after its visibility timeout',
      keySource: 'by default the idempotency-key message attribute',
      advice: ' Set the attribute when sending, or pass idempotencyKey.',
      deadLetter: (reason) => `dead-lettered (reason ${reason})`,
    };
  }

  emit(name: string, payload: object): void {
    (this.#hooks.emit as (name: string, payload: object) => void)(name, payload);
  }

  deliveryId(message: Message): string | undefined {
    return message.MessageId;
  }

  /** The receives before this one: SQS counts every run. */
  priorRuns(message: Message): number {
    return receiveCount(message) - 1;
  }

  /** Moves the visibility timeout with the lease; not awaited, but awaited before the final request. */
  extendTimer(message: Message, leaseLeftMs: number): void {
    if (!this.#options.extendVisibility) return;
    const change = this.#hooks.changeVisibility(message, Math.max(1, toVisibilitySeconds(leaseLeftMs)));
    const earlier = this.#heartbeatChanges.get(message);
    this.#heartbeatChanges.set(message, earlier ? Promise.all([earlier, change]) : change);
  }

  /** Hides the message for the conflict wait, so SQS does not hand it out again meanwhile. */
  async keepAlive(message: Message, work: Promise<unknown>, expectedMs: number): Promise<boolean> {
    await this.#hooks.changeVisibility(message, toVisibilitySeconds(expectedMs) + 1);
    await work;
    return true;
  }

  async beforeRun(message: Message, leaseMs: number, afterWait: boolean): Promise<void> {
    // The conflict wait hid the message for the wait only: hide it for the lease before the handler starts.
    if (afterWait) await this.#hooks.changeVisibility(message, Math.max(1, toVisibilitySeconds(leaseMs)));
    await this.#hooks.beforeExecute?.(message, leaseMs);
  }

  admission(message: Message): 'run' | 'stopping' | 'abandoned' {
    if (this.#hooks.abandoned?.(message)) return 'abandoned';
    return this.stopping ? 'stopping' : 'run';
  }

  async carryOut(message: Message, end: MessageEnd<unknown>): Promise<CarriedOut<ProcessedMessage<T>>> {
    try {
      await this.#heartbeatChanges.get(message);
      let decision = toSqsDecision(end.decision, receiveCount(message), this.#policy);
      const { key, outcome, attempt } = end.subject;
      const run = end.run;
      let error = end.decision.action === 'retry' ? end.decision.error : (end.error ?? (run && errorOf(run)));
      let deadLetter: DeadLetterDelivery | undefined;
      if (decision.action === 'dead-letter') {
        const sent = await this.#deadLetter(message, decision, end);
        if ('delivery' in sent) deadLetter = sent.delivery;
        else {
          decision = sent.decision;
          error = sent.error ?? error;
        }
        error ??= decision.action === 'dead-letter' ? decision.error : undefined;
      }
      this.#count(message, end.span, decision);
      end.span.end(
        end.decision.action === 'leave' && end.decision.reason === 'error' ? end.error : undefined,
      );
      const done = decision.action === 'delete' || decision.action === 'change-visibility' || !!deadLetter;
      return { done, result: { message, key, outcome, attempt, error, decision, deadLetter } };
    } finally {
      this.#spans.delete(message);
    }
  }

  /** Sends a dead letter (a copy, or the redrive policy), unless `stop()` gave up on the message. */
  async #deadLetter(
    message: Message,
    decision: Extract<Decision, { action: 'dead-letter' }>,
    end: MessageEnd<unknown>,
  ): Promise<
    { readonly delivery: DeadLetterDelivery } | { readonly decision: Decision; readonly error?: unknown }
  > {
    // stop() promised nothing more goes to SQS for it: its redelivery is dead-lettered then.
    if (this.#hooks.abandoned?.(message)) return { decision: { action: 'leave', reason: 'abandoned' } };
    const closing = this.#hooks.closing?.();
    const { key, outcome } = end.subject;
    const step = await carryOutDeadLetter(
      this.#deps.sqs,
      () => this.verifyDeadLetter(closing),
      message,
      decision,
      { outcome, key, scope: this.#options.scope },
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
      return { decision: { action: 'leave', reason: 'dead-letter-failed' }, error: step.error };
    }
    // With the redrive policy SQS moves the message itself: no mark, every receive until then leaves it.
    if (step.delivery.via === 'copy') await end.markDeadLettered();
    return { delivery: step.delivery };
  }

  #startSpan(message: Message, scope: string | undefined): MessageSpan {
    const span = this.#telemetry.start(message, scope);
    this.#spans.set(message, span);
    return span;
  }

  /** Counts the message's broker action on its span, once. */
  #count(message: Message, span: MessageSpan, decision: Decision): void {
    if (this.#counted.has(message)) return;
    this.#counted.add(message);
    span.brokerAction(decision.action);
  }
}

/** What a run threw, if it did. */
function errorOf(run: NonNullable<MessageEnd<unknown>['run']>): unknown {
  return 'error' in run ? run.error : undefined;
}
