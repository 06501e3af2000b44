import {
  type IdempotencyError,
  InvalidKeyError,
  InvalidOptionError,
  InvalidPayloadError,
  isIdempotencyError,
  MissingKeyError,
  StoreUnavailableError,
  type WrittenClaim,
} from '../errors';
import { fingerprint } from '../fingerprint';
import type { AdapterLog } from '../kit/adapter-log';
import { giveBackUnrun, writtenClaimOf } from '../kit/give-back';
import { extendHandlerContext } from '../kit/handler-context';
import { leaseLostDuring } from '../kit/lease-lost-during';
import { recordCompletionLate } from '../kit/record-completion-late';
import type { RunOverrides } from '../kit/run-overrides';
import type { StoreGate } from '../kit/store-gate';
import type { MessageSpan } from '../kit/telemetry/message-span';
import { callUnprotected, runUnprotected } from '../kit/unprotected-run';
import { UnprotectedRuns } from '../kit/unprotected-runs';
import { unreadableDuplicateOf } from '../kit/unreadable-duplicate';
import type { HandlerContext } from '../runner/handler-context';
import { describeError, type Idempotency, type RunOptions, type RunRequest } from '../runner/idempotency';
import type { LeaseRenewal } from '../runner/lease-renewal';
import type { CompletedResult, LeaseLostResult, RunResult } from '../runner/run-result';
import type { ClaimReply } from '../store/idempotency-store';
import { type Decision, type DecisionPolicy, decide } from './decide';
import { HandlerSignal } from './handler-signal';
import type { MessageEnd, MessagePort, Prepared, SubjectFields } from './port';

/** A result of a run that held a claim, or a claim settled without running. */
type ClaimedResult<T> = Exclude<RunResult<T>, { outcome: 'UNPROTECTED' }>;

/** What a {@link MessagePipeline} is built from. */
export interface PipelineParts<M, T, R> {
  readonly idempotency: Idempotency;
  /** The user's handler; it receives the runner's context with the port's `handlerFields`. */
  readonly handler: (context: never) => T | Promise<T>;
  readonly port: MessagePort<M, R>;
  /** The consumer's fail-closed switch: closed when the store does not answer. */
  readonly gate: StoreGate;
  readonly log: AdapterLog;
  /** Starts the telemetry of one message (a `MessageTelemetry`'s `start`). */
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
  /**
   * Whether a completion the store did not take closes the store gate whatever `storeFailureMode`, so it
   * is written again once the store answers. @defaultValue only when failing closed
   */
  readonly lateCompletionClosesGate?: boolean;
}

/** What a batch consumer knows of a message before {@link MessagePipeline.process}. */
export interface BatchClaim {
  /** Its claim from the batch claim, if any. */
  readonly reply?: ClaimReply;
  /** The last renewal of that claim's lease by whoever kept it alive since. */
  readonly renewedLease?: LeaseRenewal;
  /** Called when its handler returned, before its outcome is written: the next message may start. */
  readonly onHandlerReturned?: () => void;
}

/** How a message ended in the pipeline, before its span and its port are added. */
type Ending<T> = Omit<MessageEnd<T>, 'span' | 'markDeadLettered'>;

/** How one turn of the claim loop ended: the message's end, or `again` to claim once more. */
type Turn<T> = Ending<T> | 'again';

/**
 * The one per-message loop of every broker consumer (docs/design.md#pipeline-and-ports). It reads the
 * key, claims, waits for a conflicting holder, runs the handler under its lease, writes the outcome,
 * decides what the broker should do ({@link decide}) and hands that to the broker's {@link MessagePort}.
 * A store that does not answer closes the consumer's {@link StoreGate}; nothing is acked that did not
 * complete. Claims whose handler never ran are given back unrun.
 */
export class MessagePipeline<M, T, R = void> {
  /** Runs without a claim that did not end their message, and decisions whose carrying out failed. */
  readonly #unprotected = new UnprotectedRuns<Decision>();
  readonly #parts: PipelineParts<M, T, R>;
  /** The runner options of every call: the consumer's overrides but `conflictWaitMs` (the pipeline waits). */
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
    const { port } = this.#parts;
    let scope: string;
    try {
      scope = port.scopeOf(message);
      if (typeof scope !== 'string' || scope === '') {
        throw new InvalidOptionError(
          `the scope of a message must be a non-empty string, got ${String(scope)}`,
        );
      }
    } catch (error) {
      return { kind: 'unscoped', error };
    }
    let key: string | undefined;
    try {
      key = port.keyOf(message);
    } catch (error) {
      const refused = new InvalidKeyError(`The idempotency key extractor threw: ${describeError(error)}`, {
        cause: error,
      });
      return { kind: 'unkeyed', scope, reason: 'invalid-key', error: refused };
    }
    if (key === undefined || key === '') {
      const error = new MissingKeyError('The message carries no idempotency key');
      return { kind: 'unkeyed', scope, reason: 'missing-key', error };
    }
    try {
      const payload = port.payloadOf(message);
      if (payload === undefined) return { kind: 'keyed', request: { scope, key } };
      return { kind: 'keyed', request: { scope, key, fingerprint: fingerprint(payload) } };
    } catch (error) {
      const refused = isIdempotencyError(error)
        ? (error as IdempotencyError)
        : new InvalidPayloadError(`The payload could not be read: ${describeError(error)}`, { cause: error });
      return { kind: 'unkeyed', scope, reason: 'invalid-key', error: refused };
    }
  }

  /**
   * Claims the keyed messages of a batch in one round trip (`Idempotency.claimMany`). Resolves with one
   * reply per message (`undefined` for those not claimed), or `{ storeUnavailable }` when the store did not
   * answer and the runner fails closed. Resolves `undefined` when the batch cannot be claimed at once:
   * each message claims on its own.
   * @param options.reserve - claim as reservations, counted when each handler starts.
   * @param options.distinctKeys - claim a key repeated in the batch once, for its first message (a batch run
   *   in order would meet its own claim as a CONFLICT).
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
      if (options.distinctKeys && seen.has(id)) continue;
      seen.add(id);
      keyed.push({ index, request: p.request });
    }
    const replies: (ClaimReply | undefined)[] = new Array(prepared.length);
    if (keyed.length === 0) return replies;
    try {
      const claimed = await idempotency.claimMany(
        keyed.map((k) => k.request),
        { ...this.#runOptions, reserve: options.reserve },
      );
      for (const [j, k] of keyed.entries()) replies[k.index] = claimed[j];
      return replies;
    } catch (error) {
      if (isUnanswered(error) && idempotency.options.storeFailureMode === 'closed') {
        return { storeUnavailable: error };
      }
      if (!isUnanswered(error)) this.#storeError('claimMany', error, undefined);
      return undefined;
    }
  }

  /**
   * Processes one message to its end and has the port carry it out; resolves with what the port's
   * `carryOut` gave. Never rejects, but with a broker failure the port's `keepAlive` or `retryInline`
   * threw (after the claim the message held was given back).
   * @param prepared - the message read by {@link MessagePipeline.prepare}.
   * @param claimed - the message's claim from a batch claim, if any.
   */
  async process(message: M, prepared: Prepared, claimed?: BatchClaim): Promise<R> {
    const { port, telemetry } = this.#parts;
    const span = telemetry.start(message, prepared.kind === 'unscoped' ? undefined : scopeOf(prepared));
    return span.run(async () => {
      let turn: Ending<T>;
      try {
        turn = await this.#process(message, prepared, span, claimed);
      } catch (error) {
        const failure = port.brokerFailure?.(error, span);
        if (failure !== undefined) throw failure;
        this.#storeError('process', error, message);
        turn = {
          decision: { action: 'leave', reason: 'error', error },
          subject: unrunSubject(prepared),
          error,
        };
      }
      const end: MessageEnd<T> = {
        ...turn,
        span,
        markDeadLettered: () => this.#markDeadLettered(message, turn),
      };
      return this.#carryOut(message, end);
    });
  }

  /** The port carries out the end; runs without a claim are remembered when it could not. */
  async #carryOut(message: M, end: MessageEnd<T>): Promise<R> {
    const carried = await this.#parts.port.carryOut(message, end as MessageEnd<unknown>);
    const id = end.subject.outcome === 'UNPROTECTED' ? this.#parts.port.deliveryId(message) : undefined;
    if (id === undefined) return carried.result;
    if (carried.done) {
      this.#unprotected.forget(id);
      return carried.result;
    }
    if (end.run) this.#unprotected.ran(id);
    const { decision } = end;
    if (decision.action === 'ack' || decision.action === 'dead-letter') this.#unprotected.hold(id, decision);
    return carried.result;
  }

  async #process(
    message: M,
    prepared: Prepared,
    span: MessageSpan,
    claimed: BatchClaim | undefined,
  ): Promise<Ending<T>> {
    if (prepared.kind === 'unscoped') throw prepared.error;
    const held = this.#held(message);
    if (held) {
      // A run without a claim whose ending decision was not carried out: carried out again, not run.
      await this.giveBack(message, prepared, claimed?.reply);
      const key = prepared.kind === 'keyed' ? prepared.request.key : undefined;
      const attempt = held.action === 'dead-letter' ? held.attempt : 0;
      return { decision: held, subject: { scope: scopeOf(prepared), key, outcome: 'UNPROTECTED', attempt } };
    }
    if (prepared.kind === 'unkeyed') return this.#unkeyed(message, prepared, span);
    const { request } = prepared;
    let reply = claimed?.reply;
    let waited = false;
    for (;;) {
      let turn: Turn<T> | 'start-again';
      if (reply === undefined) {
        span.claiming();
        const claim = await this.#claim(message, request, span);
        if (claim === 'again') continue;
        if (!('claim' in claim)) return claim;
        reply = claim.claim;
      }
      const current: ClaimReply = reply;
      reply = undefined;
      if (current.outcome === 'CONFLICT' && !waited && this.conflictWaitMs > 0) {
        waited = true;
        const after = await this.#waitForHolder(message, request, current, claimed?.reply !== undefined);
        if ('end' in after) return after.end;
        reply = after.reply;
        continue;
      }
      if (current.outcome === 'ACQUIRED' || current.outcome === 'ACQUIRED_STALE') {
        const renewed = current === claimed?.reply ? claimed.renewedLease : undefined;
        turn = await this.#execute(
          message,
          request,
          current,
          span,
          waited,
          renewed,
          claimed?.onHandlerReturned,
        );
        if (turn === 'start-again') {
          reply = current; // the store answered again: the same claim, started again
          continue;
        }
      } else {
        turn = await this.#afterRun(message, request, this.#settle(message, current), span);
      }
      if (turn !== 'again') return turn;
    }
  }

  /** One claim of a keyed message: the reply, `again` to claim once more, or the message's end. */
  async #claim(
    message: M,
    request: RunRequest,
    span: MessageSpan,
  ): Promise<Ending<T> | { readonly claim: ClaimReply } | 'again'> {
    const { idempotency } = this.#parts;
    try {
      return { claim: await idempotency.claim(request, this.#runOptions) };
    } catch (error) {
      if (isRefusal(error)) return this.#invalidKey(message, request.scope, request.key, error);
      if (!isUnanswered(error)) {
        this.#storeError('claim', error, message);
        return this.#end(request, { action: 'leave', reason: 'error', error }, { error });
      }
      if (idempotency.options.storeFailureMode === 'closed') {
        return this.#unanswered(message, request, writtenClaimOf(error), error);
      }
      // Failing open: a claim the failed call had written is given back first, then the runner claims
      // once more and runs the handler without a claim while the store still does not answer.
      await this.giveBack(message, { kind: 'keyed', request }, writtenClaimOf(error));
      return this.#withoutClaim(message, request.scope, request, span, (attempt) =>
        this.#failOpen(message, request, span, attempt),
      );
    }
  }

  /**
   * The store did not answer a call that may have left a claim (`claim`, the claim's start, a conflict
   * wait's claim). Failing closed, the gate closes and the port may wait for the store inline: once it
   * answers the claim is given back and the message claims again. Otherwise the claim is given back once
   * the store answers, and the message goes back to the broker.
   */
  async #unanswered(
    message: M,
    request: RunRequest,
    claim: ClaimReply | WrittenClaim | undefined,
    error: unknown,
    keep = false,
  ): Promise<Ending<T> | 'again'> {
    const { gate, port, idempotency } = this.#parts;
    const prepared: Prepared = { kind: 'keyed', request };
    if (idempotency.options.storeFailureMode === 'closed') {
      gate.close(error, message);
      let answered: 'up' | 'down' | 'stop' = 'down';
      try {
        if (port.waitForStore) answered = await port.waitForStore(message, error);
      } catch (failure) {
        void this.giveBack(message, prepared, claim);
        throw failure;
      }
      if (answered === 'up') {
        if (!keep) await this.giveBack(message, prepared, claim);
        return 'again';
      }
      void this.giveBack(message, prepared, claim);
      if (answered === 'stop') return this.#end(request, { action: 'leave', reason: 'stopping' });
    } else {
      void this.giveBack(message, prepared, claim);
    }
    const decision: Decision = { action: 'leave', reason: 'store-unavailable', error };
    return this.#end(request, decision, { error });
  }

  /**
   * After a CONFLICT: waits up to `conflictWaitMs` for the holder's outcome, the port keeping the delivery
   * alive. Resolves with the reply the wait ended with (the CONFLICT itself when the store stopped
   * answering), or the message's end.
   */
  async #waitForHolder(
    message: M,
    request: RunRequest,
    conflict: ClaimReply,
    reserve: boolean,
  ): Promise<{ readonly reply: ClaimReply | undefined } | { readonly end: Ending<T> }> {
    const { idempotency, port, stopping } = this.#parts;
    const abort = new AbortController();
    const onStop = () => abort.abort();
    stopping.addEventListener('abort', onStop, { once: true });
    if (stopping.aborted) abort.abort();
    const waiting = idempotency.waitForOutcome(request, {
      ...this.#runOptions,
      conflictWaitMs: this.conflictWaitMs,
      signal: abort.signal,
      reserve,
    });
    const settled = waiting.then(
      (reply) => ({ reply }),
      (error: unknown) => ({ error }),
    );
    const prepared: Prepared = { kind: 'keyed', request };
    const heldClaim = async () => {
      const ended = await settled;
      return 'reply' in ended ? ended.reply : writtenClaimOf(ended.error);
    };
    try {
      const alive = port.keepAlive ? await port.keepAlive(message, settled, this.conflictWaitMs) : true;
      if (!alive) {
        abort.abort();
        await this.giveBack(message, prepared, await heldClaim());
        return { end: this.#end(request, { action: 'leave', reason: 'stopping' }) };
      }
    } catch (failure) {
      abort.abort();
      await this.giveBack(message, prepared, await heldClaim());
      throw failure;
    } finally {
      stopping.removeEventListener('abort', onStop);
    }
    const ended = await settled;
    if ('reply' in ended) return { reply: ended.reply };
    if (!isUnanswered(ended.error)) throw ended.error;
    const written = writtenClaimOf(ended.error);
    // The store stopped answering: nothing runs while the holder may. A claim the wait wrote is given back.
    if (written === undefined) return { reply: conflict };
    const end = await this.#unanswered(message, request, written, ended.error);
    return end === 'again' ? { reply: undefined } : { end };
  }

  /**
   * Runs the handler of a claim this consumer holds, after the port's `beforeRun`. A claim whose start
   * the store does not answer is handled as an unanswered claim; `again` starts the same claim again.
   */
  async #execute(
    message: M,
    request: RunRequest,
    claim: ClaimReply & { readonly outcome: 'ACQUIRED' | 'ACQUIRED_STALE' },
    span: MessageSpan,
    afterWait: boolean,
    renewedLease: LeaseRenewal | undefined,
    onHandlerReturned: (() => void) | undefined,
  ): Promise<Ending<T> | 'again' | 'start-again'> {
    const { idempotency, port, handler, abandoning } = this.#parts;
    const prepared: Prepared = { kind: 'keyed', request };
    await port.beforeRun?.(message, this.leaseMs, afterWait);
    const admission = port.admission?.(message) ?? 'run';
    if (admission !== 'run') {
      // No handler starts now (the consumer is stopping): the claim is given back, no attempt spent.
      await this.giveBack(message, prepared, claim);
      return this.#end(request, { action: 'leave', reason: admission });
    }
    const fields = port.handlerFields(message);
    const signal = abandoning && new HandlerSignal(abandoning);
    let result: ClaimedResult<T>;
    try {
      result = await idempotency.execute<T>(
        request,
        claim,
        (context) =>
          span.timeHandler(() =>
            handler(extendHandlerContext(context, fields, signal?.following(context) ?? context) as never),
          ),
        {
          ...this.#runOptions,
          onHeartbeat:
            port.extendTimer &&
            ((info) => port.extendTimer!(message, info.leaseExpiresAtMs - info.serverTimeMs)),
          onHandlerReturned,
          renewedLease,
        },
      );
    } catch (error) {
      if (!isUnanswered(error)) throw error;
      // The start of the claim went unanswered: nothing ran, and nothing may until the store confirms it.
      const turn = await this.#unanswered(message, request, claim, error, true);
      return turn === 'again' ? 'start-again' : turn;
    } finally {
      signal?.dispose();
    }
    return this.#afterRun(message, request, result, span);
  }

  /**
   * After a claimed run or a settled claim: records it on the span, writes a completion the runner could
   * not write, reports a lost lease, and decides. A retry the port waits inline ends in `again`.
   */
  async #afterRun(
    message: M,
    request: RunRequest,
    ran: ClaimedResult<T>,
    span: MessageSpan,
  ): Promise<Ending<T> | 'again'> {
    let result = ran;
    span.result(result, request.key);
    if ('status' in result && result.status === 'completed' && !result.recorded) {
      const written = await this.#completeLate(message, request, result);
      if (written === undefined)
        return this.#end(request, { action: 'leave', reason: 'stopping' }, { run: result });
      if ('error' in written) {
        const { error } = written;
        return this.#end(request, { action: 'leave', reason: 'error', error }, { run: result, error });
      }
      result = written.result;
    }
    if ('status' in result && result.status === 'lease-lost')
      await this.#reportLeaseLost(message, request, result);
    const subject = subjectOf(request, result.outcome, result.attempt);
    const end = { decision: decide(result, this.#parts.options.policy), subject, run: result };
    return this.#retryInline(message, end, span);
  }

  /** A retry the port waits for inline: `again`, or the end. */
  async #retryInline<E extends Ending<T>>(message: M, end: E, span: MessageSpan): Promise<E | 'again'> {
    const { decision } = end;
    if (decision.action !== 'retry') return end;
    const inline = this.#parts.port.retryInline?.(message, decision, end.subject);
    if (inline === undefined) return end;
    span.brokerAction('retry');
    if ((await inline) === 'again') return 'again';
    return { ...end, decision: { action: 'leave', reason: 'stopping' } };
  }

  /**
   * A completion the runner could not record. A port whose ack commits every earlier message waits for
   * the write, keeping the delivery alive (`undefined` when the delivery ended first; the write goes on
   * in the background). Otherwise the message is acked and the write is made once the store answers.
   */
  async #completeLate(
    message: M,
    request: RunRequest,
    run: CompletedResult<T>,
  ): Promise<{ readonly result: ClaimedResult<T> } | { readonly error: unknown } | undefined> {
    const { idempotency, gate, port, stopping, options } = this.#parts;
    const failClosed = idempotency.options.storeFailureMode === 'closed';
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
      if (closeGate || failClosed) {
        const error = new StoreUnavailableError(
          `the store did not take the COMPLETED write of key ${request.key}; it is written once the store answers`,
        );
        gate.close(error, message);
      }
      later();
      return { result: run };
    }
    for (;;) {
      if (stopping.aborted) {
        later();
        return undefined;
      }
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
        let alive: boolean;
        try {
          alive = port.keepAlive ? await port.keepAlive(message, open, Number.POSITIVE_INFINITY) : true;
        } catch (failure) {
          later();
          throw failure;
        }
        if (!alive || !(await open)) {
          later();
          return undefined;
        }
      }
    }
  }

  /** A message without a key, or whose key or payload could not be read. */
  async #unkeyed(
    message: M,
    prepared: Extract<Prepared, { kind: 'unkeyed' }>,
    span: MessageSpan,
  ): Promise<Ending<T>> {
    const { port, log, options } = this.#parts;
    if (prepared.reason === 'invalid-key')
      return this.#invalidKey(message, prepared.scope, undefined, prepared.error);
    const subject: SubjectFields = { scope: prepared.scope, key: undefined, outcome: undefined, attempt: 0 };
    port.emit('missingKey', { ...port.subject(message, subject), action: options.missingKey });
    const words = port.warningWords(message);
    const fate =
      options.missingKey === 'process'
        ? 'processed without idempotency (outcome UNPROTECTED)'
        : words.deadLetter('missing-key');
    log.warnOnce(
      'missing-key',
      `a message ${words.where} has no idempotency key (${words.keySource}); it is ${fate}.${words.advice} Further ones are reported only by the missingKey event.`,
      { scope: prepared.scope },
    );
    if (options.missingKey === 'dead-letter') {
      const decision = letter('missing-key', describeError(prepared.error));
      return { decision, subject, error: prepared.error };
    }
    return this.#withoutClaim(message, prepared.scope, undefined, span, (attempt) =>
      this.#runWithoutKey(message, prepared.scope, span, attempt),
    );
  }

  /** A key the extractor or the store refused, or a payload that cannot be fingerprinted: dead-lettered. */
  #invalidKey(message: M, scope: string, key: string | undefined, error: IdempotencyError): Ending<T> {
    const { port, log } = this.#parts;
    const subject: SubjectFields = { scope, key, outcome: undefined, attempt: 0 };
    port.emit('invalidKey', { ...port.subject(message, subject), error });
    const words = port.warningWords(message);
    log.warnOnce(
      'invalid-key',
      `a message ${words.where} has an invalid idempotency key or payload (${describeError(error)}); it is ${words.deadLetter('invalid-key')}. Further ones are reported only by the invalidKey event.`,
      { scope },
    );
    return { decision: letter('invalid-key', describeError(error)), subject, error };
  }

  /**
   * Runs a message without a claim (`run`), counted per delivery and bounded by `maxAttempts`. A run
   * that turns out to hold a claim (failing open, the store answered) goes on as a claimed run.
   */
  async #withoutClaim(
    message: M,
    scope: string,
    request: RunRequest | undefined,
    span: MessageSpan,
    run: (attempt: number) => Promise<RunResult<T>>,
  ): Promise<Ending<T>> {
    const { port, options } = this.#parts;
    const id = port.deliveryId(message);
    const key = request?.key;
    for (;;) {
      const attempt = id === undefined ? 1 : this.#unprotected.attemptOf(id, port.priorRuns?.(message) ?? 0);
      const max = options.policy.maxAttempts;
      if (attempt > max) {
        // Its runs are used up and the decision after the last was not carried out: not run again.
        const error = `The handler ran ${attempt - 1} times without protection (maxAttempts ${max})`;
        const decision = { ...letter('attempts-exhausted', error), attempt: attempt - 1 };
        return { decision, subject: { scope, key, outcome: 'UNPROTECTED', attempt: attempt - 1 } };
      }
      const admission = port.admission?.(message) ?? 'run';
      if (admission !== 'run') {
        return {
          decision: { action: 'leave', reason: admission },
          subject: { scope, key, outcome: undefined, attempt: 0 },
        };
      }
      span.claiming();
      const result = await run(attempt);
      if (result.outcome !== 'UNPROTECTED') {
        const turn = await this.#afterRun(message, request!, result, span);
        if (turn === 'again') continue;
        return turn;
      }
      span.result(result, key);
      const subject: SubjectFields = { scope, key, outcome: 'UNPROTECTED', attempt };
      const end = { decision: decide(result, options.policy, attempt), subject, run: result };
      const turn = await this.#retryInline(message, end, span);
      if (turn !== 'again') return turn;
      if (id !== undefined) this.#unprotected.ran(id);
    }
  }

  /** A run of a message without a key: the handler with no claim, its signal bounded. */
  #runWithoutKey(message: M, scope: string, span: MessageSpan, attempt: number): Promise<RunResult<T>> {
    const { handler, port, stopping } = this.#parts;
    return runUnprotected<T, HandlerContext & object>(
      (context) => span.timeHandler(() => handler(context as never)),
      {
        scope,
        key: undefined as never,
        fencingToken: 0,
        attempt,
        outcome: 'UNPROTECTED',
        ...port.handlerFields(message),
      },
      stopping,
      { handlerTimeoutMs: this.#handlerTimeoutMs() },
    );
  }

  /**
   * Failing open: the runner claims once more and, while the store still does not answer, emits
   * `failOpen` and runs the handler without a claim, its signal aborting when the consumer stops or
   * `handlerTimeoutMs` passes.
   */
  #failOpen(message: M, request: RunRequest, span: MessageSpan, attempt: number): Promise<RunResult<T>> {
    const { idempotency, handler, port, stopping } = this.#parts;
    const fields = port.handlerFields(message);
    return idempotency
      .run<T>(
        request,
        (context) =>
          span.timeHandler(() =>
            context.outcome === 'UNPROTECTED'
              ? callUnprotected(
                  (signal) => handler({ ...context, ...fields, attempt, signal } as never),
                  stopping,
                  this.#handlerTimeoutMs(),
                  context,
                )
              : handler(extendHandlerContext(context, fields) as never),
          ),
        {
          ...this.#runOptions,
          conflictWaitMs: 0,
          onHeartbeat:
            port.extendTimer &&
            ((info) => port.extendTimer!(message, info.leaseExpiresAtMs - info.serverTimeMs)),
        },
      )
      .catch((error: unknown) => this.#unreadable(message, error));
  }

  /** `Idempotency.settle` of a claim whose handler must not run. */
  #settle(message: M, reply: ClaimReply): ClaimedResult<T> {
    try {
      return this.#parts.idempotency.settle<T>(reply);
    } catch (error) {
      return this.#unreadable(message, error);
    }
  }

  /**
   * A DUPLICATE whose stored result cannot be decoded (a newer version's, or corrupt bytes): the operation
   * completed, so it is settled as any DUPLICATE, with a `storeError` event. @throws any other error.
   */
  #unreadable(message: M, error: unknown): ClaimedResult<T> & { outcome: 'DUPLICATE' } {
    const duplicate = unreadableDuplicateOf(error, this.#parts.log);
    if (!duplicate) throw error;
    this.#storeError('settle', error, message);
    return duplicate;
  }

  /** Reports a lost claim, reading the record once to say whether it vanished or was taken over. */
  async #reportLeaseLost(message: M, request: RunRequest, result: LeaseLostResult<T>): Promise<void> {
    const { port, idempotency } = this.#parts;
    let reason: 'record-vanished' | 'taken-over' | 'unknown';
    try {
      const record = await idempotency.store.get({ scope: request.scope, key: request.key });
      reason = record === null ? 'record-vanished' : 'taken-over';
    } catch {
      reason = 'unknown';
    }
    port.emit('leaseLost', {
      ...port.subject(message, subjectOf(request, result.outcome, result.attempt)),
      during: leaseLostDuring(result),
      handlerCompleted: result.handlerCompleted,
      fencingToken: result.fencingToken,
      reason,
    });
  }

  /**
   * Gives back a claim whose handler did not run and will not (no attempt spent), again each time the
   * store gate opens until the store answers or the consumer stops. Anything but a held claim is ignored.
   * Resolves after the first try, or at once while the gate is closed.
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

  /** Marks the FAILED record of a dead letter once its copy is sent; failures are `storeError` events. */
  async #markDeadLettered(message: M, end: Ending<T>): Promise<void> {
    const { decision, subject } = end;
    if (decision.action !== 'dead-letter' || decision.failedFencingToken === undefined) return;
    if (subject.key === undefined) return;
    try {
      await this.#parts.idempotency.markDeadLettered(
        { scope: subject.scope, key: subject.key },
        { fencingToken: decision.failedFencingToken },
      );
    } catch (error) {
      this.#storeError('markDeadLettered', error, message);
    }
  }

  /** The held decision of a run without a claim of `message`, if any. */
  #held(message: M): Decision | undefined {
    if (this.#unprotected.size === 0) return undefined;
    const id = this.#parts.port.deliveryId(message);
    return id === undefined ? undefined : this.#unprotected.get(id)?.held;
  }

  #end(
    request: RunRequest,
    decision: Decision,
    extra: { readonly run?: RunResult<T>; readonly error?: unknown } = {},
  ): Ending<T> {
    const run = extra.run;
    const outcome = run?.outcome;
    const attempt = run && 'attempt' in run ? run.attempt : 0;
    return { decision, subject: subjectOf(request, outcome, attempt), ...extra };
  }

  #storeError(operation: string, error: unknown, message: M | undefined): void {
    const { port } = this.#parts;
    port.emit('storeError', port.storeError(operation, error, message));
  }

  #handlerTimeoutMs(): number {
    return this.#parts.options.overrides.handlerTimeoutMs ?? this.#parts.idempotency.options.handlerTimeoutMs;
  }
}

function scopeOf(prepared: Exclude<Prepared, { kind: 'unscoped' }>): string {
  return prepared.kind === 'keyed' ? prepared.request.scope : prepared.scope;
}

function subjectOf(request: RunRequest, outcome: SubjectFields['outcome'], attempt: number): SubjectFields {
  return { scope: request.scope, key: request.key, outcome, attempt };
}

function unrunSubject(prepared: Prepared): SubjectFields {
  if (prepared.kind === 'unscoped') return { scope: '', key: undefined, outcome: undefined, attempt: 0 };
  const key = prepared.kind === 'keyed' ? prepared.request.key : undefined;
  return { scope: scopeOf(prepared), key, outcome: undefined, attempt: 0 };
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
