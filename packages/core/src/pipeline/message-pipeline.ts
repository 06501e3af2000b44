import {
  type IdempotencyError,
  isIdempotencyError,
  StoreUnavailableError,
  type WrittenClaim,
} from '../errors';
import type { AdapterLog } from '../kit/adapter-log';
import { giveBackUnrun, writtenClaimOf } from '../kit/give-back';
import { extendHandlerContext } from '../kit/handler-context';
import { leaseLostDuring } from '../kit/lease-lost-during';
import { recordCompletionLate } from '../kit/record-completion-late';
import type { RunOverrides } from '../kit/run-overrides';
import type { StoreGate } from '../kit/store-gate';
import type { MessageSpan } from '../kit/telemetry/message-span';
import { callUnprotected } from '../kit/unprotected-run';
import { UnprotectedRuns } from '../kit/unprotected-runs';
import { unreadableDuplicateOf } from '../kit/unreadable-duplicate';
import type { HandlerContext } from '../runner/handler-context';
import { describeError, type Idempotency, type RunOptions, type RunRequest } from '../runner/idempotency';
import type { LeaseRenewal } from '../runner/lease-renewal';
import type { CompletedResult, LeaseLostResult, RunResult } from '../runner/run-result';
import type { ClaimReply } from '../store/idempotency-store';
import { type Decision, type DecisionPolicy, decide, type LeaveReason } from './decide';
import { HandlerSignal } from './handler-signal';
import type { MessageEnd, MessagePort, Prepared, SubjectFields } from './port';
import { prepare } from './prepare';

type Claimed<T> = Exclude<RunResult<T>, { outcome: 'UNPROTECTED' }>;
type Acquired = ClaimReply & { readonly outcome: 'ACQUIRED' | 'ACQUIRED_STALE' };
/** How a message ended in the pipeline, before its span and its port are added. */
type Ending<T> = Omit<MessageEnd<T>, 'span' | 'markDeadLettered'>;

/** What a {@link MessagePipeline} is built from. */
export interface PipelineParts<M, T, R> {
  readonly idempotency: Idempotency;
  /** The user's handler: it receives the runner's context with the port's `handlerFields`. */
  readonly handler: (context: never) => T | Promise<T>;
  readonly port: MessagePort<M, R>;
  /** The consumer's fail-closed switch, closed while the store does not answer. */
  readonly gate: StoreGate;
  readonly log: AdapterLog;
  /** Starts the telemetry of one message. */
  readonly telemetry: { start(message: M, scope: string | undefined): MessageSpan };
  /** Aborts when the consumer stops: waits end, and handlers without a claim see their signal abort. */
  readonly stopping: AbortSignal;
  /** Aborts when `stop()` gives up on the messages in flight: their handlers' signal aborts too. */
  readonly abandoning?: AbortSignal;
  readonly options: PipelineOptions;
}

/** The consumer options the pipeline reads. */
export interface PipelineOptions {
  /** What a message without a key gets: a dead letter, or a run without a claim. */
  readonly missingKey: 'dead-letter' | 'process';
  /** The consumer's overrides of the runner's options. */
  readonly overrides: RunOverrides;
  readonly policy: DecisionPolicy;
  /** Whether a completion written late closes the store gate whatever `storeFailureMode`. */
  readonly lateCompletionClosesGate?: boolean;
}

/** What a batch consumer knows of a message before {@link MessagePipeline.process}. */
export interface BatchClaim {
  /** Its claim from the batch claim, if any. */
  readonly reply?: ClaimReply | undefined;
  /** The last renewal of that claim's lease by whoever kept it alive since. */
  readonly renewedLease?: LeaseRenewal | undefined;
  /** Called when its handler returned, before its outcome is written: the next message may start. */
  readonly onHandlerReturned?: () => void;
}

/** One keyed message on its way through the pipeline. */
interface Job<M> {
  readonly message: M;
  readonly request: RunRequest;
  readonly span: MessageSpan;
  readonly batch: BatchClaim | undefined;
}

/**
 * The one per-message loop of every broker consumer (docs/design.md#pipeline-and-ports). It reads the
 * key, claims, waits for a conflicting holder, runs the handler under its lease, writes the outcome,
 * decides what the broker should do and hands that to the broker's {@link MessagePort}. A store that does
 * not answer closes the consumer's {@link StoreGate}, and nothing is acked that did not complete. A claim
 * whose handler never ran is given back unrun.
 */
export class MessagePipeline<M, T, R = void> {
  /** Runs without a claim that did not end their message, and decisions whose carrying out failed. */
  readonly #unprotected = new UnprotectedRuns<Decision>();
  readonly #parts: PipelineParts<M, T, R>;
  /** The runner options of every call: the consumer's overrides, the conflict wait left to the pipeline. */
  readonly #runOptions: RunOptions;

  constructor(parts: PipelineParts<M, T, R>) {
    this.#parts = parts;
    const { conflictWaitMs: _, ...overrides } = parts.options.overrides;
    this.#runOptions = overrides;
  }

  /** How long a CONFLICT waits for its holder, in milliseconds. */
  get conflictWaitMs(): number {
    return this.#parts.options.overrides.conflictWaitMs ?? this.#parts.idempotency.options.conflictWaitMs;
  }

  /** The lease of these messages, in milliseconds. */
  get leaseMs(): number {
    return this.#parts.options.overrides.leaseMs ?? this.#parts.idempotency.options.leaseMs;
  }

  /** Reads a message's scope, key and payload. Never throws. */
  prepare(message: M): Prepared {
    return prepare(this.#parts.port, message);
  }

  /**
   * Claims the keyed messages of a batch in one round trip. Resolves with a reply per message
   * (`undefined` for one not claimed), `{ storeUnavailable }` when the store did not answer and the runner
   * fails closed, or `undefined` when each message must claim on its own.
   * @param options.reserve - claim reservations, counted when each handler starts.
   * @param options.distinctKeys - claim a repeated key once: a batch run in order would meet its own claim.
   */
  async claimBatch(
    prepared: readonly Prepared[],
    options: { readonly reserve: boolean; readonly distinctKeys?: boolean },
  ): Promise<(ClaimReply | undefined)[] | { readonly storeUnavailable: unknown } | undefined> {
    const { idempotency } = this.#parts;
    const seen = new Set<string>();
    const keyed: { readonly index: number; readonly request: RunRequest }[] = [];
    for (const [index, p] of prepared.entries()) {
      if (p.kind !== 'keyed') continue;
      const id = `${p.request.scope.length}:${p.request.scope}:${p.request.key}`;
      if (!(options.distinctKeys && seen.has(id))) keyed.push({ index, request: p.request });
      seen.add(id);
    }
    const replies: (ClaimReply | undefined)[] = new Array(prepared.length);
    if (keyed.length === 0) return replies;
    try {
      const requests = keyed.map((k) => k.request);
      const claimed = await idempotency.claimMany(requests, {
        ...this.#runOptions,
        reserve: options.reserve,
      });
      for (const [j, k] of keyed.entries()) replies[k.index] = claimed[j];
      return replies;
    } catch (error) {
      if (!isUnanswered(error)) this.#storeError('claimMany', error, undefined);
      else if (idempotency.options.storeFailureMode === 'closed') return { storeUnavailable: error };
      return undefined;
    }
  }

  /**
   * Processes one message to its end, then has the port carry it out and resolves with what the port
   * gave. Rejects only with a broker failure the port's `keepAlive` or `retryInline` threw.
   */
  async process(message: M, prepared: Prepared, batch?: BatchClaim): Promise<R> {
    const { port, telemetry } = this.#parts;
    const span = telemetry.start(message, prepared.kind === 'unscoped' ? undefined : scopeOf(prepared));
    return span.run(async () => {
      let ending: Ending<T>;
      try {
        ending = await this.#process(message, prepared, span, batch);
      } catch (error) {
        const failure = port.brokerFailure?.(error, span);
        if (failure !== undefined) throw failure;
        this.#storeError('process', error, message);
        ending = {
          decision: { action: 'leave', reason: 'error', error },
          subject: preparedSubject(prepared),
          error,
        };
      }
      const end = { ...ending, span, markDeadLettered: () => this.#markDeadLettered(message, ending) };
      const carried = await port.carryOut(message, end as MessageEnd<unknown>);
      this.#remember(message, end, carried.done);
      return carried.result;
    });
  }

  /** Remembers a run without a claim whose end the port could not carry out, for its next delivery. */
  #remember(message: M, end: Ending<T>, done: boolean): void {
    const id = end.subject.outcome === 'UNPROTECTED' ? this.#parts.port.deliveryId(message) : undefined;
    if (id === undefined) return;
    const { decision } = end;
    if (done) this.#unprotected.forget(id);
    else if (end.run) this.#unprotected.ran(id);
    if (!done && (decision.action === 'ack' || decision.action === 'dead-letter')) {
      this.#unprotected.hold(id, decision);
    }
  }

  async #process(message: M, prepared: Prepared, span: MessageSpan, batch?: BatchClaim): Promise<Ending<T>> {
    if (prepared.kind === 'unscoped') throw prepared.error;
    const held = this.#held(message);
    if (held) {
      // A run without a claim whose ending decision was not carried out: carried out again, not run.
      await this.giveBack(message, prepared, batch?.reply);
      const key = prepared.kind === 'keyed' ? prepared.request.key : undefined;
      const attempt = held.action === 'dead-letter' ? held.attempt : 0;
      return { decision: held, subject: subject(scopeOf(prepared), key, 'UNPROTECTED', attempt) };
    }
    if (prepared.kind === 'unkeyed') return this.#unkeyed(message, prepared, span);
    const job: Job<M> = { message, request: prepared.request, span, batch };
    let reply = batch?.reply;
    let waited = false;
    for (;;) {
      if (reply === undefined) {
        span.claiming();
        const claim = await this.#claim(job);
        if (claim === 'again') continue;
        if (!('claim' in claim)) return claim;
        reply = claim.claim;
      }
      const current: ClaimReply = reply;
      reply = undefined;
      let turn: Ending<T> | 'again' | 'start-again';
      if (current.outcome === 'CONFLICT' && !waited && this.conflictWaitMs > 0) {
        waited = true;
        const after = await this.#waitForHolder(job, current);
        if ('end' in after) return after.end;
        reply = after.reply;
        continue;
      }
      if (current.outcome === 'ACQUIRED' || current.outcome === 'ACQUIRED_STALE') {
        turn = await this.#execute(job, current, waited);
        // The store answered the start of the claim again: the same claim is started once more.
        if (turn === 'start-again') reply = current;
      } else {
        turn = await this.#afterRun(job, this.#settle(message, current));
      }
      if (turn !== 'again' && turn !== 'start-again') return turn;
    }
  }

  /** One claim: the reply, `again` to claim once more, or the message's end. */
  async #claim(job: Job<M>): Promise<Ending<T> | { readonly claim: ClaimReply } | 'again'> {
    const { idempotency } = this.#parts;
    try {
      return { claim: await idempotency.claim(job.request, this.#runOptions) };
    } catch (error) {
      if (isRefusal(error)) return this.#invalidKey(job.message, job.request.scope, job.request.key, error);
      if (!isUnanswered(error)) {
        this.#storeError('claim', error, job.message);
        return this.#end(job, 'error', { error });
      }
      if (idempotency.options.storeFailureMode === 'closed') {
        return this.#unanswered(job, writtenClaimOf(error), error);
      }
      // Failing open: a claim the failed call wrote is given back, then the runner claims once more and
      // runs the handler without a claim while the store still does not answer.
      await this.giveBack(job.message, { kind: 'keyed', request: job.request }, writtenClaimOf(error));
      return this.#withoutClaim(job.message, job.span, job.request.scope, job, (attempt) =>
        this.#failOpen(job, attempt),
      );
    }
  }

  /**
   * The store did not answer a call that may have left a claim. Failing closed, the gate closes and the
   * port may wait for the store inline; once it answers, the message claims again (`keep`: starts the
   * same claim again). Otherwise the claim is given back once the store answers and the message goes back.
   */
  async #unanswered(
    job: Job<M>,
    claim: ClaimReply | WrittenClaim | undefined,
    error: unknown,
    keep = false,
  ): Promise<Ending<T> | 'again'> {
    const { gate, port, idempotency } = this.#parts;
    const giveBack = () => this.giveBack(job.message, { kind: 'keyed', request: job.request }, claim);
    let answered: 'up' | 'down' | 'stop' = 'down';
    if (idempotency.options.storeFailureMode === 'closed') {
      gate.close(error, job.message);
      try {
        answered = (await port.waitForStore?.(job.message, error)) ?? 'down';
      } catch (failure) {
        void giveBack();
        throw failure;
      }
    }
    if (answered === 'up') {
      if (!keep) await giveBack();
      return 'again';
    }
    void giveBack();
    return answered === 'stop' ? this.#end(job, 'stopping') : this.#end(job, 'store-unavailable', { error });
  }

  /**
   * After a CONFLICT: waits up to `conflictWaitMs` for the holder's outcome while the port keeps the
   * delivery alive. Resolves with the reply the wait ended with (the CONFLICT when the store stopped
   * answering; `undefined` to claim again), or the message's end.
   */
  async #waitForHolder(
    job: Job<M>,
    conflict: ClaimReply,
  ): Promise<{ readonly reply: ClaimReply | undefined } | { readonly end: Ending<T> }> {
    const { idempotency, port, stopping } = this.#parts;
    const abort = new AbortController();
    const onStop = () => abort.abort();
    stopping.addEventListener('abort', onStop, { once: true });
    if (stopping.aborted) abort.abort();
    const options = { ...this.#runOptions, conflictWaitMs: this.conflictWaitMs, signal: abort.signal };
    const reserve = job.batch?.reply !== undefined;
    const settled = idempotency.waitForOutcome(job.request, { ...options, reserve }).then(
      (reply) => ({ reply }),
      (error: unknown) => ({ error }),
    );
    const giveBackHeld = async () => {
      abort.abort();
      const ended = await settled;
      const held = 'reply' in ended ? ended.reply : writtenClaimOf(ended.error);
      await this.giveBack(job.message, { kind: 'keyed', request: job.request }, held);
    };
    try {
      if (port.keepAlive && !(await port.keepAlive(job.message, settled, this.conflictWaitMs))) {
        await giveBackHeld();
        return { end: this.#end(job, 'stopping') };
      }
    } catch (failure) {
      await giveBackHeld();
      throw failure;
    } finally {
      stopping.removeEventListener('abort', onStop);
    }
    const ended = await settled;
    if ('reply' in ended) return { reply: ended.reply };
    if (!isUnanswered(ended.error)) throw ended.error;
    // The store stopped answering: nothing runs while the holder may. A claim the wait wrote is given back.
    const written = writtenClaimOf(ended.error);
    if (written === undefined) return { reply: conflict };
    const end = await this.#unanswered(job, written, ended.error);
    return end === 'again' ? { reply: undefined } : { end };
  }

  /** Runs the handler of a claim this consumer holds; `start-again` when the store answered its start late. */
  async #execute(
    job: Job<M>,
    claim: Acquired,
    afterWait: boolean,
  ): Promise<Ending<T> | 'again' | 'start-again'> {
    const { idempotency, port, abandoning } = this.#parts;
    const { message, batch } = job;
    await port.beforeRun?.(message, this.leaseMs, afterWait);
    const admission = port.admission?.(message) ?? 'run';
    if (admission !== 'run') {
      // No handler starts now: the claim is given back, no attempt spent.
      await this.giveBack(message, { kind: 'keyed', request: job.request }, claim);
      return this.#end(job, admission);
    }
    const signal = abandoning && new HandlerSignal(abandoning);
    let result: Claimed<T>;
    try {
      result = await idempotency.execute<T>(
        job.request,
        claim,
        (context) => this.#call(job, context, signal?.following(context) ?? context),
        {
          ...this.#runOptions,
          onHeartbeat: this.#onHeartbeat(message),
          onHandlerReturned: batch?.onHandlerReturned,
          renewedLease: claim === batch?.reply ? batch.renewedLease : undefined,
        },
      );
    } catch (error) {
      if (!isUnanswered(error)) throw error;
      // Its start went unanswered: nothing ran, and nothing may until the store confirms the start.
      const turn = await this.#unanswered(job, claim, error, true);
      return turn === 'again' ? 'start-again' : turn;
    } finally {
      signal?.dispose();
    }
    return this.#afterRun(job, result);
  }

  /**
   * After a claimed run or a settled claim: records it, writes a completion the runner could not write,
   * reports a lost lease, and decides. A retry the port waits inline ends in `again`.
   */
  async #afterRun(job: Job<M>, ran: Claimed<T>): Promise<Ending<T> | 'again'> {
    let run = ran;
    job.span.result(run, job.request.key);
    if ('status' in run && run.status === 'completed' && !run.recorded) {
      const written = await this.#completeLate(job, run);
      if (!('result' in written))
        return this.#end(job, written.error ? 'error' : 'stopping', { run, ...written });
      run = written.result;
    }
    if ('status' in run && run.status === 'lease-lost') await this.#reportLeaseLost(job, run);
    const end = {
      decision: decide(run, this.#parts.options.policy),
      subject: subjectOf(job.request, run),
      run,
    };
    return this.#retryInline(job.message, end, job.span);
  }

  /** A retry the port waits inline: `again`, or the end. */
  async #retryInline<E extends Ending<T>>(message: M, end: E, span: MessageSpan): Promise<E | 'again'> {
    const { decision } = end;
    const inline =
      decision.action === 'retry' && this.#parts.port.retryInline?.(message, decision, end.subject);
    if (!inline) return end;
    span.brokerAction('retry');
    return (await inline) === 'again'
      ? 'again'
      : { ...end, decision: { action: 'leave', reason: 'stopping' } };
  }

  /**
   * A completion the runner could not record. A port whose ack commits every earlier message waits for
   * the write while it keeps the delivery alive; `{}` when the delivery ended first (the write goes on in
   * the background). Any other message is acked, and the write is made once the store answers.
   */
  async #completeLate(
    job: Job<M>,
    run: CompletedResult<T>,
  ): Promise<{ readonly result: Claimed<T> } | { readonly error?: unknown }> {
    const { idempotency, gate, port, stopping, options } = this.#parts;
    const { message, request } = job;
    const closeGate = options.lateCompletionClosesGate === true || port.completionBeforeAck === true;
    const later = () => {
      void recordCompletionLate(idempotency, request, run, {
        gate,
        closeGate: closeGate ? 'always' : 'when failing closed',
        signal: stopping,
        onStoreError: (error) => this.#storeError('complete', error, message),
      });
    };
    if (!port.completionBeforeAck) {
      if (closeGate || idempotency.options.storeFailureMode === 'closed') {
        const what = `the store did not take the COMPLETED write of key ${request.key}; it is written once it answers`;
        gate.close(new StoreUnavailableError(what), message);
      }
      later();
      return { result: run };
    }
    while (!stopping.aborted) {
      try {
        return { result: await idempotency.completeClaim(request, run) };
      } catch (error) {
        this.#storeError('complete', error, message);
        if (!gate.closeIfUnavailable(error, message)) {
          this.#parts.log.error(
            `the COMPLETED write of key ${JSON.stringify(request.key)} failed with an error that is not an outage (${describeError(error)}): the handler completed, but ${port.warningWords(message).unacknowledged} (it may run again once the claim's lease lapses)`,
            { scope: request.scope, key: request.key, fencingToken: run.fencingToken, error },
          );
          return { error };
        }
        const open = gate.waitUntilOpen(stopping);
        try {
          if (!(await (port.keepAlive?.(message, open, Number.POSITIVE_INFINITY) ?? true)) || !(await open))
            break;
        } catch (failure) {
          later();
          throw failure;
        }
      }
    }
    later();
    return {};
  }

  /** A message without a key, or whose key or payload could not be read. */
  async #unkeyed(
    message: M,
    prepared: Extract<Prepared, { kind: 'unkeyed' }>,
    span: MessageSpan,
  ): Promise<Ending<T>> {
    const { port, log, options } = this.#parts;
    const { scope, error } = prepared;
    if (prepared.reason === 'invalid-key') return this.#invalidKey(message, scope, undefined, error);
    port.emit('missingKey', { ...port.subject(message, subject(scope)), action: options.missingKey });
    const words = port.warningWords(message);
    const fate =
      options.missingKey === 'process'
        ? 'processed without idempotency (outcome UNPROTECTED)'
        : words.deadLetter('missing-key');
    log.warnOnce(
      'missing-key',
      `a message ${words.where} has no idempotency key (${words.keySource}); it is ${fate}.${words.advice} Further ones are reported only by the missingKey event.`,
      { scope },
    );
    if (options.missingKey === 'dead-letter') {
      return { decision: letter('missing-key', describeError(error)), subject: subject(scope), error };
    }
    return this.#withoutClaim(message, span, scope, undefined, async (attempt) => {
      const context = { scope, key: undefined, fencingToken: 0, attempt, outcome: 'UNPROTECTED' as const };
      try {
        const result = await this.#callUnprotected(message, span, context);
        return { outcome: 'UNPROTECTED', status: 'completed', result, storeError: undefined };
      } catch (error) {
        return { outcome: 'UNPROTECTED', status: 'threw', error, storeError: undefined };
      }
    });
  }

  /** A key the extractor or the store refused, or a payload that cannot be fingerprinted: a dead letter. */
  #invalidKey(message: M, scope: string, key: string | undefined, error: IdempotencyError): Ending<T> {
    const { port, log } = this.#parts;
    port.emit('invalidKey', { ...port.subject(message, subject(scope, key)), error });
    const words = port.warningWords(message);
    log.warnOnce(
      'invalid-key',
      `a message ${words.where} has an invalid idempotency key or payload (${describeError(error)}); it is ${words.deadLetter('invalid-key')}. Further ones are reported only by the invalidKey event.`,
      { scope },
    );
    return { decision: letter('invalid-key', describeError(error)), subject: subject(scope, key), error };
  }

  /**
   * Runs a message without a claim, counted per delivery and bounded by `maxAttempts`. A run that turns
   * out to hold a claim (failing open, the store answered it) goes on as a claimed run.
   */
  async #withoutClaim(
    message: M,
    span: MessageSpan,
    scope: string,
    job: Job<M> | undefined,
    run: (attempt: number) => Promise<RunResult<T>>,
  ): Promise<Ending<T>> {
    const { port, options } = this.#parts;
    const id = port.deliveryId(message);
    const key = job?.request.key;
    const max = options.policy.maxAttempts;
    for (;;) {
      const attempt = id === undefined ? 1 : this.#unprotected.attemptOf(id, port.priorRuns?.(message) ?? 0);
      if (attempt > max) {
        // Its runs are used up, and the decision after the last was not carried out: not run again.
        const error = `The handler ran ${attempt - 1} times without protection (maxAttempts ${max})`;
        const decision = { ...letter('attempts-exhausted', error), attempt: attempt - 1 };
        return { decision, subject: subject(scope, key, 'UNPROTECTED', attempt - 1) };
      }
      const admission = port.admission?.(message) ?? 'run';
      if (admission !== 'run')
        return { decision: { action: 'leave', reason: admission }, subject: subject(scope, key) };
      span.claiming();
      const result = await run(attempt);
      if (result.outcome !== 'UNPROTECTED') {
        const turn = await this.#afterRun(job!, result);
        if (turn === 'again') continue;
        return turn;
      }
      span.result(result, key);
      const fields = subject(scope, key, 'UNPROTECTED', attempt);
      const turn = await this.#retryInline(
        message,
        { decision: decide(result, options.policy, attempt), subject: fields, run: result },
        span,
      );
      if (turn !== 'again') return turn;
      if (id !== undefined) this.#unprotected.ran(id);
    }
  }

  /**
   * Failing open: the runner claims once more and, while the store still does not answer, emits
   * `failOpen` and runs the handler without a claim.
   */
  #failOpen(job: Job<M>, attempt: number): Promise<RunResult<T>> {
    const { message, span } = job;
    return this.#parts.idempotency
      .run<T>(
        job.request,
        (context) =>
          context.outcome === 'UNPROTECTED'
            ? this.#callUnprotected(message, span, { ...context, attempt })
            : this.#call(job, context, context),
        { ...this.#runOptions, conflictWaitMs: 0, onHeartbeat: this.#onHeartbeat(message) },
      )
      .catch((error: unknown) => this.#unreadable(message, error));
  }

  /** The handler without a claim, its signal aborting when the consumer stops or `handlerTimeoutMs` passes. */
  #callUnprotected(
    message: M,
    span: MessageSpan,
    context: Omit<HandlerContext, 'signal' | 'key'> & { readonly key: string | undefined },
  ): Promise<T> {
    const { handler, port, stopping, idempotency, options } = this.#parts;
    const fields = port.handlerFields(message);
    const timeoutMs = options.overrides.handlerTimeoutMs ?? idempotency.options.handlerTimeoutMs;
    const call = (signal: AbortSignal) => handler({ ...context, ...fields, signal } as never);
    return span.timeHandler(() => callUnprotected(call, stopping, timeoutMs, context)) as Promise<T>;
  }

  /** The handler with the port's fields, timed by its telemetry. */
  #call(job: Job<M>, context: HandlerContext, signal: { readonly signal: AbortSignal }): Promise<T> | T {
    const fields = this.#parts.port.handlerFields(job.message);
    return job.span.timeHandler(() =>
      this.#parts.handler(extendHandlerContext(context, fields, signal) as never),
    );
  }

  #onHeartbeat(message: M): RunOptions['onHeartbeat'] {
    const { port } = this.#parts;
    return (
      port.extendTimer && ((info) => port.extendTimer!(message, info.leaseExpiresAtMs - info.serverTimeMs))
    );
  }

  /** `Idempotency.resultOf` of a claim whose handler must not run. */
  #settle(message: M, reply: ClaimReply): Claimed<T> {
    try {
      return this.#parts.idempotency.resultOf<T>(reply);
    } catch (error) {
      return this.#unreadable(message, error);
    }
  }

  /**
   * A DUPLICATE whose stored result cannot be decoded (a newer version's, or corrupt bytes) is settled as
   * any DUPLICATE, with a `storeError` event. @throws any other error.
   */
  #unreadable(message: M, error: unknown): Claimed<T> & { outcome: 'DUPLICATE' } {
    const duplicate = unreadableDuplicateOf(error, this.#parts.log);
    if (!duplicate) throw error;
    this.#storeError('settle', error, message);
    return duplicate;
  }

  /** Reports a lost claim, reading the record once to say whether it vanished or was taken over. */
  async #reportLeaseLost(job: Job<M>, run: LeaseLostResult<T>): Promise<void> {
    const { port, idempotency } = this.#parts;
    const reason = await idempotency.store.get(job.request).then(
      (record) => (record === null ? 'record-vanished' : 'taken-over'),
      () => 'unknown',
    );
    const { during, handlerCompleted, fencingToken } = { ...run, during: leaseLostDuring(run) };
    const payload = { during, handlerCompleted, fencingToken, reason };
    port.emit('leaseLost', { ...port.subject(job.message, subjectOf(job.request, run)), ...payload });
  }

  /**
   * Gives back a claim whose handler did not run and will not (no attempt spent), again each time the
   * store gate opens until the store answers or the consumer stops. Resolves after the first try.
   */
  giveBack(message: M, prepared: Prepared, claim: ClaimReply | WrittenClaim | undefined): Promise<void> {
    if (prepared.kind !== 'keyed') return Promise.resolve();
    const { idempotency, gate, stopping } = this.#parts;
    return giveBackUnrun(idempotency, prepared.request, claim, {
      gate,
      signal: stopping,
      onStoreError: (error) => this.#storeError('release', error, message),
    });
  }

  /** Marks the FAILED record of a dead letter once its copy is sent; a failure is a `storeError` event. */
  async #markDeadLettered(message: M, { decision, subject }: Ending<T>): Promise<void> {
    if (decision.action !== 'dead-letter' || decision.failedFencingToken === undefined) return;
    if (subject.key === undefined) return;
    const token = { fencingToken: decision.failedFencingToken };
    await this.#parts.idempotency
      .markDeadLettered({ scope: subject.scope, key: subject.key }, token)
      .catch((error: unknown) => this.#storeError('markDeadLettered', error, message));
  }

  /** The held decision of a run without a claim of `message`, if any. */
  #held(message: M): Decision | undefined {
    if (this.#unprotected.size === 0) return undefined;
    const id = this.#parts.port.deliveryId(message);
    return id === undefined ? undefined : this.#unprotected.get(id)?.held;
  }

  /** An end that goes back to the broker. */
  #end(
    job: Job<M>,
    reason: LeaveReason,
    extra: { readonly run?: RunResult<T>; readonly error?: unknown } = {},
  ): Ending<T> {
    const { run, error } = extra;
    const fields = run ? subjectOf(job.request, run) : subject(job.request.scope, job.request.key);
    return { decision: { action: 'leave', reason, error }, subject: fields, ...extra };
  }

  #storeError(operation: string, error: unknown, message: M | undefined): void {
    const { port } = this.#parts;
    port.emit('storeError', port.storeError(operation, error, message));
  }
}

function scopeOf(prepared: Exclude<Prepared, { kind: 'unscoped' }>): string {
  return prepared.kind === 'keyed' ? prepared.request.scope : prepared.scope;
}

function preparedSubject(prepared: Prepared): SubjectFields {
  if (prepared.kind === 'unscoped') return subject('');
  return subject(scopeOf(prepared), prepared.kind === 'keyed' ? prepared.request.key : undefined);
}

function subject(
  scope: string,
  key?: string,
  outcome?: SubjectFields['outcome'],
  attempt = 0,
): SubjectFields {
  return { scope, key, outcome, attempt };
}

function subjectOf(request: RunRequest, run: RunResult<unknown>): SubjectFields {
  return subject(request.scope, request.key, run.outcome, 'attempt' in run ? run.attempt : 0);
}

function letter(reason: 'missing-key' | 'invalid-key' | 'attempts-exhausted', error: string): Decision {
  return { action: 'dead-letter', reason, attempt: 0, error, failedFencingToken: undefined };
}

function isUnanswered(error: unknown): boolean {
  return isIdempotencyError(error) && error.code === 'STORE_UNAVAILABLE';
}

/** A refusal of the request itself: a key the store does not take, a payload it cannot fingerprint. */
function isRefusal(error: unknown): error is IdempotencyError {
  return (
    isIdempotencyError(error) &&
    (error.code === 'INVALID_IDEMPOTENCY_KEY' || error.code === 'INVALID_PAYLOAD')
  );
}
