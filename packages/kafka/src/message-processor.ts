import {
  type ClaimReply,
  type CompletedResult,
  type DuplicateResult,
  describeError,
  fingerprint,
  type Idempotency,
  InvalidKeyError,
  InvalidOptionError,
  isIdempotencyError,
  type LeaseRenewal,
  type RunOptions,
  type RunOutcome,
  type RunRequest,
  type RunResult,
  type WrittenClaim,
} from '@idempotent-consumer/core';
import {
  type AdapterLog,
  callUnprotected,
  extendHandlerContext,
  giveBackUnrun,
  type HeaderCarrier,
  leaseLostDuring,
  type MessageSpan,
  type MessageTelemetry,
  NOOP_MESSAGE_SPAN,
  runUnprotected,
  type StoreGate,
  UnprotectedRuns,
  unreadableDuplicateOf,
  writtenClaimOf,
} from '@idempotent-consumer/core/kit';
import { writeCompletion } from './completion-writer';
import { DeadLetterSender } from './dead-letter-sender';
import { type Decision, type DecisionPolicy, decide } from './decide';
import type {
  KafkaIdempotencyEvents as Events,
  KafkaEventEmitter,
  KafkaSource,
  LeaseLostReason,
  MessageSubject,
} from './events';
import type { KafkaHandler, KafkaHandlerContext } from './handler';
import { heartbeatUntil, type WaitContext, waitHeartbeating } from './inline-wait';
import type { ResolvedKafkaOptions } from './options';
import { kafkaTelemetry, type TelemetryDelivery } from './telemetry';
import type { KafkaMessageLike, ProducerLike } from './types';

/** One message being handled, and the controls of the delivery it came in. */
export interface Delivery extends WaitContext {
  readonly topic: string;
  readonly partition: number;
  readonly message: KafkaMessageLike;
  /** Its telemetry, set by {@link MessageProcessor.process} when there is any. */
  readonly span?: MessageSpan;
}

/**
 * How {@link MessageProcessor.process} ended for one message: its offset may resolve, or it stays
 * unresolved with its partition (or, `delayMs` `undefined`, its topic until the store answers) paused, or
 * the delivery ended first (`stop`: the consumer stops, the batch went stale).
 */
export type ProcessEnd =
  | {
      readonly action: 'resolve';
      /** The `settled` event's payload: the wrapper emits it once it resolved the offset. */
      readonly settled: Events['settled'][0];
      /**
       * The message's telemetry, still open: the wrapper reports whether it resolved the offset
       * ({@link offsetResolved}, {@link offsetUnresolved}), as a batch may stop before it does.
       */
      readonly span: MessageSpan;
    }
  | PauseEnd
  | { readonly action: 'stop' };

/** A `pause` end: the decision the wrapper carries out, with the message's telemetry. */
export type PauseEnd = Extract<Decision, { action: 'pause' }> & {
  /**
   * The message's telemetry, still open: the wrapper reports whether it paused ({@link offsetPaused},
   * {@link offsetUnresolved}), as a batch may stop before it does.
   */
  readonly span: MessageSpan;
  /** An error of the adapter itself the span ends with (status ERROR): a store error the processing threw. */
  readonly failure?: unknown;
};

/** How the processing ended inside {@link MessageProcessor}: a {@link ProcessEnd} before its span is attached. */
type Ending = Exclude<ProcessEnd, PauseEnd> | Extract<Decision, { action: 'pause' }>;

/** The wrapper resolved the offset of a `resolve` end: its broker action is recorded, its span ends. */
export function offsetResolved(end: Extract<ProcessEnd, { action: 'resolve' }>): void {
  end.span.brokerAction(end.settled.decision.action);
  end.span.end();
}

/**
 * The wrapper paused the partition (or the topic) of a `pause` end: its broker action (`pause`) is
 * recorded, once per paused message, and its span ends.
 */
export function offsetPaused(end: PauseEnd): void {
  end.span.brokerAction(end.action);
  end.span.end(end.failure);
}

/**
 * A `resolve` or `pause` end the batch did not carry out (an earlier message stopped it; the re-fetch ends
 * it again): its span ends without a broker action.
 */
export function offsetUnresolved(end: ProcessEnd | undefined): void {
  if (end?.action === 'resolve') end.span.end();
  else if (end?.action === 'pause') end.span.end(end.failure);
}

/**
 * A message with its key read: a run request, or why there is none; `unscoped` when the `scope` function
 * threw, or returned no non-empty string (`error`, an `InvalidOptionError` then): {@link MessageProcessor.process} ends it as a store error does, a pause of one backoff
 * step (the message is fetched again, and the scope asked again).
 */
export type PreparedMessage =
  | { readonly kind: 'keyed'; readonly request: RunRequest }
  | {
      readonly kind: 'unkeyed';
      readonly scope: string;
      readonly reason: 'missing-key' | 'invalid-key';
      readonly error: string;
    }
  | { readonly kind: 'unscoped'; readonly error: unknown };

/**
 * A rejection of the broker's `heartbeat()` during an inline wait (a rebalance); the wrappers rethrow it.
 * Thrown by {@link MessageProcessor.process} with the message's telemetry still open (`span`): the
 * wrapper ends it, recording a `pause` when it pauses instead ({@link offsetPaused}).
 */
export class BrokerHeartbeatFailure {
  constructor(
    readonly cause: unknown,
    readonly span: MessageSpan = NOOP_MESSAGE_SPAN,
  ) {}
}

const isStoreUnavailable = (e: unknown) => isIdempotencyError(e) && e.code === 'STORE_UNAVAILABLE';

/**
 * Handles one message for the `eachMessage` and `eachBatch` wrappers: claims (or takes the batch's
 * claim), waits for a conflicting holder, runs through the runner, asks {@link decide} what Kafka should
 * see, and carries it out: inline waits (heartbeating), dead-letter sends, the completion write the runner
 * could not make. Anything longer than `maxInlineDelayMs` ends as a pause, left to the wrapper.
 */
export class MessageProcessor<T> {
  readonly #policy: DecisionPolicy;
  readonly #deadLetters: DeadLetterSender;
  /**
   * Runs of UNPROTECTED messages that did not end them, by `topic/partition/offset` (no record counts
   * them), and the dead-letter decision of one whose copy failed (its re-fetch sends it, not running again).
   */
  readonly #unprotectedRuns = new UnprotectedRuns<Extract<Decision, { action: 'dead-letter' }>>();
  readonly #telemetry: MessageTelemetry<TelemetryDelivery, HeaderCarrier>;

  constructor(
    private readonly idempotency: Idempotency,
    producer: ProducerLike | undefined,
    private readonly options: ResolvedKafkaOptions,
    private readonly handler: KafkaHandler<T>,
    private readonly events: KafkaEventEmitter,
    private readonly gate: StoreGate,
    private readonly log: AdapterLog,
    private readonly stopping: AbortSignal,
  ) {
    this.#policy = {
      retryBackoff: options.retryBackoff,
      maxInlineDelayMs: options.maxInlineDelayMs,
      maxConflictDelayMs: options.maxConflictDelayMs,
      maxAttempts: options.maxAttempts ?? idempotency.options.maxAttempts,
      isRetryable: idempotency.options.isRetryable,
    };
    this.#deadLetters = new DeadLetterSender(
      idempotency,
      producer,
      options.deadLetterTopicOf,
      events,
      stopping,
    );
    this.#telemetry = kafkaTelemetry(options.groupId, options.telemetry);
  }

  /**
   * Reads the idempotency key and builds the run request (scope, key, fingerprint of the payload). Never
   * throws: a `scope` function that throws makes the message `unscoped`.
   */
  prepare(topic: string, partition: number, message: KafkaMessageLike): PreparedMessage {
    let scope: unknown;
    try {
      scope = this.options.scopeOf(topic);
    } catch (error) {
      return { kind: 'unscoped', error };
    }
    if (typeof scope !== 'string' || scope === '') {
      // A function from plain JavaScript: ended like a throwing one, not a TypeError out of eachBatch.
      const error = new InvalidOptionError(
        `the scope function returned ${typeof scope === 'string' ? 'an empty string' : typeof scope} for topic ${topic}; it must return a non-empty string`,
      );
      return { kind: 'unscoped', error };
    }
    let key: string | undefined;
    try {
      key = this.options.idempotencyKey(message, { topic, partition });
    } catch (error) {
      return { kind: 'unkeyed', scope, reason: 'invalid-key', error: describeError(error) };
    }
    if (key === undefined) {
      return {
        kind: 'unkeyed',
        scope,
        reason: 'missing-key',
        error: 'The message carries no idempotency key',
      };
    }
    let digest: string | undefined;
    try {
      const payload = this.options.fingerprintOf ? this.options.fingerprintOf(message) : undefined;
      digest = payload === undefined ? undefined : fingerprint(payload);
    } catch (error) {
      // It would throw on every re-fetch: dead-lettered like a key that cannot be read.
      return { kind: 'unkeyed', scope, reason: 'invalid-key', error: describeError(error) };
    }
    const request: RunRequest = digest === undefined ? { scope, key } : { scope, key, fingerprint: digest };
    return { kind: 'keyed', request };
  }

  /**
   * Per-call options of the runner for one delivery: overrides, and the broker heartbeat with each lease
   * extension. The heartbeat is sent, not awaited (one at a time): the runner awaits `onHeartbeat` before
   * its next lease extension and before the write after the handler, and KafkaJS's heartbeat waits on the
   * group coordinator (up to its `requestTimeout` when the broker hangs). Awaited, a broker that did not
   * answer stopped the extensions: the lease lapsed under a running handler, and the message's end waited
   * for the broker.
   */
  runOptions(delivery: Delivery): RunOptions {
    let beating = false;
    const options: {
      leaseMs?: number;
      maxAttempts?: number;
      handlerTimeoutMs?: number;
      onHeartbeat: () => void;
    } = {
      onHeartbeat: () => {
        if (beating) return;
        beating = true;
        delivery
          .heartbeat()
          .catch((error: unknown) => {
            this.events.emit('brokerError', { operation: 'heartbeat', error, source: sourceOf(delivery) });
          })
          .finally(() => {
            beating = false;
          });
      },
    };
    if (this.options.leaseMs !== undefined) options.leaseMs = this.options.leaseMs;
    if (this.options.maxAttempts !== undefined) options.maxAttempts = this.options.maxAttempts;
    if (this.options.handlerTimeoutMs !== undefined) options.handlerTimeoutMs = this.options.handlerTimeoutMs;
    return options;
  }

  /**
   * Handles one message to the end or to a pause. `firstReply` is the message's claim when the caller
   * already made it (a batch claim); otherwise it claims. `onHandlerReturned` is called when a run of the
   * handler returned (before its outcome is written): a batch may start the next message's handler then,
   * while this one's completion is being written (each-batch.ts). `renewedLease` is the last confirmed
   * extension of `firstReply`'s lease by whoever kept it alive (a batch's `LeaseKeeperSet`): its first run
   * counts the lease from there (`ExecuteOptions.renewedLease`). A claim whose start the store does not
   * answer runs nothing and ends like an unanswered claim: the topic paused until the store answers. Any
   * other error of the processing (a store error the runner threw, or the `scope` function's of an
   * `unscoped` message) ends as a `pause` of one backoff step,
   * with a `storeError` event (`operation` `process`). A `resolve` or `pause` end comes with the message's
   * span still open: the wrapper records its broker action once it carried it out ({@link offsetResolved},
   * {@link offsetPaused}).
   * @throws {@link BrokerHeartbeatFailure} when the broker heartbeat rejects during an inline wait.
   */
  async process(
    delivery: Delivery,
    prepared: PreparedMessage,
    firstReply?: ClaimReply,
    onHandlerReturned?: () => void,
    renewedLease?: LeaseRenewal,
  ): Promise<ProcessEnd> {
    const span = this.span(delivery, prepared);
    const traced = span === NOOP_MESSAGE_SPAN ? delivery : { ...delivery, span };
    try {
      const end = await span.run(() =>
        this.#process(traced, prepared, firstReply, onHandlerReturned, renewedLease),
      );
      if (end.action === 'stop') {
        span.end();
        return end;
      }
      return { ...end, span }; // ended by the wrapper
    } catch (error) {
      if (error instanceof BrokerHeartbeatFailure) throw new BrokerHeartbeatFailure(error.cause, span);
      this.events.emit('storeError', { operation: 'process', error, source: sourceOf(delivery) });
      return { ...this.#pauseAfterError('store-error', error), span, failure: error };
    }
  }

  /**
   * Starts the telemetry of one message ({@link MessageProcessor.process} does for each message it
   * handles; a batch whose claim the store did not answer, for the message it pauses at).
   */
  span(delivery: Delivery, prepared: PreparedMessage): MessageSpan {
    return this.#telemetry.start(
      delivery,
      prepared.kind === 'keyed'
        ? prepared.request.scope
        : prepared.kind === 'unkeyed'
          ? prepared.scope
          : undefined,
    );
  }

  async #process(
    delivery: Delivery,
    prepared: PreparedMessage,
    firstReply?: ClaimReply,
    onHandlerReturned?: () => void,
    renewedLease?: LeaseRenewal,
  ): Promise<Ending> {
    const span = delivery.span ?? NOOP_MESSAGE_SPAN;
    // The scope function threw: ended by process() as a store error (a `storeError` event, a pause).
    if (prepared.kind === 'unscoped') throw prepared.error;
    if (prepared.kind === 'unkeyed') {
      const subject = this.#subject(delivery, prepared.scope, undefined, undefined, 0);
      if (prepared.reason === 'missing-key') {
        this.events.emit('missingKey', { ...subject, action: this.options.missingKey });
        this.log.warnOnce(
          'missing-key',
          `a message on ${delivery.topic} has no idempotency key (by default the idempotency-key header, else the Kafka message key); it is ${this.options.missingKey === 'process' ? 'processed without idempotency (outcome UNPROTECTED)' : this.#deadLetterWhat(delivery.topic, 'missing-key')}. Further ones are reported only by the missingKey event.`,
          { topic: delivery.topic, partition: delivery.partition, offset: delivery.message.offset },
        );
        if (this.options.missingKey === 'process') {
          const ran = await this.#unprotected(delivery, prepared.scope, undefined, (attempt) =>
            this.#runWithoutKey(delivery, prepared.scope, attempt),
          );
          // A run without a key never claims; were it to, the offset stays unresolved (never acked).
          return 'claimed' in ran ? { action: 'stop' } : ran;
        }
      } else {
        this.#invalidKey(delivery, subject, prepared.error);
      }
      const letter = {
        action: 'dead-letter',
        reason: prepared.reason,
        attempt: 0,
        error: prepared.error,
        failedFencingToken: undefined,
      } as const;
      return this.#finish(delivery, subject, letter);
    }
    const { request } = prepared;
    const runOptions = this.runOptions(delivery);
    let reply = firstReply;
    let waitedForHolder = false;
    for (;;) {
      if (reply === undefined) {
        span.claiming();
        try {
          reply = await this.idempotency.claim(request, runOptions);
        } catch (error) {
          if (isStoreUnavailable(error)) {
            if (this.idempotency.options.storeFailureMode === 'open') {
              // A claim the failed call had written (its give-back unanswered too) is given back first (one
              // try): the runner's claim would meet it as a CONFLICT until its lease lapsed.
              await this.#giveBack(delivery, request, writtenClaimOf(error));
              // Fail open through the runner (`run`: its `failOpen` event), bounded like any unprotected run.
              const ran = await this.#unprotected(delivery, request.scope, request.key, (attempt) =>
                this.#failOpen(delivery, request, runOptions, attempt),
              );
              if (!('claimed' in ran)) return ran;
              // The store answered that run's claim: the run was a claimed one after all.
              const end = await this.#afterRun(delivery, request, ran.claimed);
              if (end !== 'again') return end;
              continue;
            }
            const unanswered = await this.#claimUnanswered(delivery, request, error);
            if (unanswered !== undefined) return unanswered;
            continue;
          }
          const subject = this.#subject(delivery, request.scope, request.key, undefined, 0);
          if (isIdempotencyError(error) && error.code === 'INVALID_IDEMPOTENCY_KEY') {
            this.#invalidKey(delivery, subject, describeError(error));
            const letter = {
              action: 'dead-letter',
              reason: 'invalid-key',
              attempt: 0,
              error: describeError(error),
              failedFencingToken: undefined,
            } as const;
            return this.#finish(delivery, subject, letter);
          }
          this.events.emit('storeError', { operation: 'claim', error, source: subject.source });
          return this.#finish(delivery, subject, this.#pauseAfterError('store-error', error));
        }
      }
      const current: ClaimReply = reply;
      reply = undefined;
      if (current.outcome === 'CONFLICT' && !waitedForHolder && this.options.conflictWaitMs > 0) {
        waitedForHolder = true;
        // A batch claim (`claimMany`) reserves: the claim the wait ends with is a reservation too.
        const waited = await this.#waitForHolder(delivery, request, runOptions, firstReply !== undefined);
        if (waited === 'stop') return { action: 'stop' };
        if (waited !== undefined && 'unanswered' in waited) {
          // The store did not answer the wait, nor the give-back of a claim the wait had written.
          const unanswered = await this.#claimUnanswered(delivery, request, waited.unanswered);
          if (unanswered !== undefined) return unanswered;
          continue;
        }
        reply = waited; // the holder's outcome (or CONFLICT still); `undefined`: the store did not answer
        continue;
      }
      let result: Exclude<RunResult<T>, { outcome: 'UNPROTECTED' }>;
      if (current.outcome === 'ACQUIRED' || current.outcome === 'ACQUIRED_STALE') {
        // The renewal handed over belongs to the first claim (the same claim when its start is retried).
        const renewed = current === firstReply ? renewedLease : undefined;
        try {
          result = await this.idempotency.execute(
            request,
            current,
            (context) =>
              span.timeHandler(() =>
                this.handler(extendHandlerContext(context, this.#brokerFields(delivery))),
              ),
            // The runner says when the handler returned in time (not a late return after a timeout).
            onHandlerReturned || renewed
              ? { ...runOptions, onHandlerReturned, renewedLease: renewed }
              : runOptions,
          );
        } catch (error) {
          if (!isStoreUnavailable(error)) throw error;
          const end = await this.#startUnanswered(delivery, request, current, error);
          if (end !== 'again') return end;
          reply = current; // the same claim, started again
          continue;
        }
      } else {
        result = this.#settle(delivery, current);
      }
      const end = await this.#afterRun(delivery, request, result);
      if (end !== 'again') return end;
    }
  }

  /**
   * The store did not answer a claim (or a CONFLICT wait's claim), failing closed: waits for it like any
   * unanswered store call ({@link MessageProcessor.awaitStore}). A claim the failed call had written, whose
   * give-back inside the runner went unanswered too (`StoreUnavailableError.writtenClaim`), is given back
   * (`#giveBack`: no attempt spent): awaited once the store answers within the wait, so the claim made
   * again next is not met by this message's own claim as a CONFLICT until its lease lapsed; else in the
   * background once the gate opens (the topic pauses meanwhile, and a re-fetch that claims first waits for
   * the release as for any holder).
   * @returns `undefined` when the store answered (the caller claims again), else the end to return (`pause`
   *   of the topic until the store answers, or `stop`).
   * @throws {@link BrokerHeartbeatFailure} when the broker heartbeat rejects (a rebalance); the claim is
   *   given back once the store answers.
   */
  async #claimUnanswered(
    delivery: Delivery,
    request: RunRequest,
    error: unknown,
  ): Promise<Ending | undefined> {
    const written = writtenClaimOf(error);
    const answered = await this.#awaitStoreHolding(delivery, request, written, error);
    if (answered !== 'up') return answered;
    await this.#giveBack(delivery, request, written);
    return undefined;
  }

  /**
   * {@link MessageProcessor.awaitStore} while `claim` (a claim no handler ran under, or `undefined`) is
   * held: `up` leaves it to the caller; any other end gives it back (`#giveBack`, not awaited: once the
   * store answers).
   * @returns `up`, or the end to return (`pause` of the topic until the store answers, or `stop`).
   * @throws {@link BrokerHeartbeatFailure} when the broker heartbeat rejects (a rebalance).
   */
  async #awaitStoreHolding(
    delivery: Delivery,
    request: RunRequest,
    claim: ClaimReply | WrittenClaim | undefined,
    error: unknown,
  ): Promise<'up' | Ending> {
    let answered: 'up' | 'down' | 'stop';
    try {
      answered = await this.awaitStore(delivery, error);
    } catch (heartbeatFailure) {
      void this.#giveBack(delivery, request, claim);
      throw heartbeatFailure;
    }
    if (answered === 'up') return 'up';
    void this.#giveBack(delivery, request, claim);
    if (answered === 'stop') return { action: 'stop' };
    return { action: 'pause', reason: 'store-unavailable', delayMs: undefined, error };
  }

  /**
   * The store did not answer the start of `claim` (a reservation's `start`, or the one `extend` of a claim
   * with less than one heartbeat interval of its lease left before its handler): no handler ran, and none
   * may run until the store confirms the start, whatever `storeFailureMode` (the claim may still be held; Redis may have applied the start and
   * only its reply was lost). Fails closed like an unanswered claim ({@link MessageProcessor.awaitStore}:
   * the gate closes, `storeUnavailable` once per outage, an inline wait up to `maxInlineDelayMs`).
   * @returns `again` when the store answers within it: the claim is started again, which counts its
   *   attempt once even when the first start was applied (lua/start.lua); else the end to return (`pause`
   *   of the topic until the store answers, or `stop`), the claim given back once the store answers
   *   (`#giveBack`, not awaited: the topic pauses meanwhile, and a re-fetch that claims first waits for
   *   this release as for any holder), so its re-fetch claims it at once.
   * @throws {@link BrokerHeartbeatFailure} when the broker heartbeat rejects (a rebalance); the claim is
   *   given back once the store answers.
   */
  async #startUnanswered(
    delivery: Delivery,
    request: RunRequest,
    claim: ClaimReply,
    error: unknown,
  ): Promise<Ending | 'again'> {
    const answered = await this.#awaitStoreHolding(delivery, request, claim, error);
    return answered === 'up' ? 'again' : answered;
  }

  /**
   * After a claimed run (or a settled claim): records it on the span, writes a completion the runner could
   * not write ({@link writeCompletion}), reports a lost lease, and carries out {@link decide}'s decision.
   */
  async #afterRun(
    delivery: Delivery,
    request: RunRequest,
    ran: Exclude<RunResult<T>, { outcome: 'UNPROTECTED' }>,
  ): Promise<Ending | 'again'> {
    let result = ran;
    delivery.span?.result(result, request.key);
    const subject = this.#subject(delivery, request.scope, request.key, result.outcome, result.attempt);
    if ('status' in result && result.status === 'completed' && !result.recorded) {
      // The handler completed but COMPLETED is not written: the offset must not resolve past it.
      const written = await this.#writeCompletion(delivery, request, result, subject);
      if (written.status === 'written') result = written.result;
      else return written.end;
    }
    if ('status' in result && result.status === 'lease-lost') {
      await this.#reportLeaseLost(subject, request, result);
    }
    return this.#carryOut(delivery, subject, decide(result, this.#policy));
  }

  /**
   * {@link writeCompletion} for a run the runner completed without recording it. An error that is not an
   * outage ends the tries: the offset stays unresolved (the partition pauses one backoff step and the
   * message is fetched again), with a `storeError` event and an error in the log.
   * @throws {@link BrokerHeartbeatFailure} when the broker heartbeat rejects while the write waits for the
   *   store (a rebalance), as in every other inline wait.
   */
  async #writeCompletion(
    delivery: Delivery,
    request: RunRequest,
    run: CompletedResult<T>,
    subject: MessageSubject,
  ): Promise<
    | { readonly status: 'written'; readonly result: Exclude<RunResult<T>, { outcome: 'UNPROTECTED' }> }
    | { readonly status: 'ended'; readonly end: Ending }
  > {
    const written = await writeCompletion(
      this.idempotency,
      idOf(request),
      run,
      {
        ...delivery,
        // Marked as the broker's, so the wrappers pass a rebalance through to KafkaJS instead of taking
        // it for a store error (a `storeError` event and a partition pause).
        heartbeat: () =>
          delivery.heartbeat().catch((error: unknown) => {
            throw new BrokerHeartbeatFailure(error);
          }),
        source: subject.source,
      },
      this.gate,
      this.stopping,
      this.options,
      this.events,
    );
    if (written.status === 'written') return written;
    if (written.status === 'stopped') return { status: 'ended', end: { action: 'stop' } };
    this.log.error(
      `the COMPLETED write of key ${JSON.stringify(request.key)} of scope ${JSON.stringify(request.scope)} failed with an error that is not an outage (${describeError(written.error)}): the handler completed, but ${delivery.topic}[${delivery.partition}]@${delivery.message.offset} stays unresolved and is fetched again (it may run again once the claim's lease lapses)`,
      { scope: request.scope, key: request.key, fencingToken: run.fencingToken, error: written.error },
    );
    const end = await this.#finish(delivery, subject, this.#pauseAfterError('store-error', written.error));
    return { status: 'ended', end };
  }

  /**
   * The store did not answer: closes the store gate (emitting `storeUnavailable` when this call closed
   * it) and waits inline, heartbeating, up to `maxInlineDelayMs` in all for the gate's probe to answer
   * (`StoreGate.waitUntilOpenWithin`: each ping's own time counts against it).
   * @returns `up` when the store answers, `down` when it did not within the budget, `stop` when the
   *   delivery had to end first.
   * @throws {@link BrokerHeartbeatFailure} when the broker heartbeat rejects (a rebalance).
   */
  async awaitStore(delivery: Delivery, error: unknown): Promise<'up' | 'down' | 'stop'> {
    if (this.gate.close(error)) {
      this.events.emit('storeUnavailable', { topic: delivery.topic, partition: delivery.partition, error });
    }
    const abort = new AbortController();
    const open = this.gate.waitUntilOpenWithin(this.options.maxInlineDelayMs, abort.signal);
    let finished: boolean;
    try {
      finished = await heartbeatUntil(open, delivery, this.options.brokerHeartbeatIntervalMs);
    } catch (heartbeatError) {
      abort.abort();
      throw new BrokerHeartbeatFailure(heartbeatError);
    }
    if (!finished) {
      abort.abort();
      return 'stop';
    }
    return (await open) ? 'up' : 'down';
  }

  /** Carries out a decision: `retry` waits inline (emitting `retryScheduled`), then `again`; see {@link #finish}. */
  async #carryOut(
    delivery: Delivery,
    subject: MessageSubject,
    decision: Decision,
  ): Promise<Ending | 'again'> {
    if (decision.action !== 'retry') return this.#finish(delivery, subject, decision);
    const { reason, delayMs, error } = decision;
    delivery.span?.brokerAction(decision.action);
    if (delayMs > 0) {
      this.events.emit('retryScheduled', { ...subject, reason, delayMs, paused: false, error });
      if (!(await this.#wait(delivery, delayMs))) return { action: 'stop' };
    }
    return 'again';
  }

  /**
   * Carries out a decision that ends the message's processing here: `resolve`, `dead-letter` (sends; a
   * failed produce pauses, a produce the wrapper's `close()` ended stops), both ending `resolve` with the
   * `settled` event for the wrapper to emit, and the broker action to record, once it resolved the offset
   * (a batch may stop before it: then neither), `pause` (emits `retryScheduled`, returned to the wrapper
   * to pause, which records the broker action once it paused).
   */
  async #finish(
    delivery: Delivery,
    subject: MessageSubject,
    decision: Exclude<Decision, { action: 'retry' }>,
  ): Promise<Ending> {
    switch (decision.action) {
      case 'resolve':
        this.#unprotectedRuns.forget(offsetId(delivery));
        return { action: 'resolve', settled: { ...subject, decision }, span: NOOP_MESSAGE_SPAN };
      case 'dead-letter': {
        const sent = await this.#deadLetters.send(delivery.message, subject, decision);
        if (sent !== 'sent') {
          // An unprotected run's re-fetch sends this copy again without running the handler again.
          if (subject.outcome === 'UNPROTECTED') this.#unprotectedRuns.hold(offsetId(delivery), decision);
          // Closed before the broker answered: the offset stays unresolved, nothing more to wait for.
          if (sent === 'stopped') return { action: 'stop' };
          return this.#finish(delivery, subject, this.#pauseAfterError('dead-letter-failed', undefined));
        }
        this.#unprotectedRuns.forget(offsetId(delivery));
        return { action: 'resolve', settled: { ...subject, decision }, span: NOOP_MESSAGE_SPAN };
      }
      case 'pause': {
        // Recorded on the span by the wrapper once it paused (offsetPaused).
        const { reason, delayMs, error } = decision;
        if (reason !== 'store-unavailable' && delayMs !== undefined) {
          this.events.emit('retryScheduled', { ...subject, reason, delayMs, paused: true, error });
        }
        return decision;
      }
    }
  }

  /** A pause of one backoff step after a store or broker error the wrapper absorbed. */
  #pauseAfterError(
    reason: 'store-error' | 'dead-letter-failed',
    error: unknown,
  ): Extract<Decision, { action: 'pause' }> {
    const delayMs = this.options.retryBackoff.baseMs ?? 1000;
    return { action: 'pause', reason, delayMs, error };
  }

  /**
   * Runs a message without a claim (`runOnce`), retrying inline (or by pausing) like a claimed message;
   * its runs are counted here per offset, and bounded by `maxAttempts`. Resolves with `claimed` when a run
   * turned out to hold a claim (fail-open through the runner, whose claim the store answered this time).
   */
  async #unprotected(
    delivery: Delivery,
    scope: string,
    key: string | undefined,
    runOnce: (attempt: number) => Promise<RunResult<T>>,
  ): Promise<Ending | { readonly claimed: Exclude<RunResult<T>, { outcome: 'UNPROTECTED' }> }> {
    const id = offsetId(delivery);
    for (;;) {
      const held = this.#unprotectedRuns.get(id)?.held;
      const attempt = this.#unprotectedRuns.attemptOf(id);
      if (held || attempt > this.#policy.maxAttempts) {
        // Its last run's dead letter was not sent (or its runs are used up): send it, do not run again.
        const subject = this.#subject(delivery, scope, key, 'UNPROTECTED', attempt - 1);
        return this.#finish(
          delivery,
          subject,
          held ?? {
            action: 'dead-letter',
            reason: 'attempts-exhausted',
            attempt: attempt - 1,
            error: `The handler ran ${attempt - 1} times without protection (maxAttempts ${this.#policy.maxAttempts})`,
            failedFencingToken: undefined,
          },
        );
      }
      delivery.span?.claiming();
      const result = await runOnce(attempt);
      if (result.outcome !== 'UNPROTECTED') return { claimed: result };
      delivery.span?.result(result, key);
      if (result.status === 'threw') this.#unprotectedRuns.ran(id);
      const subject = this.#subject(delivery, scope, key, 'UNPROTECTED', attempt);
      const end = await this.#carryOut(delivery, subject, decide(result, this.#policy, attempt));
      if (end !== 'again') return end;
    }
  }

  /** A run of a message without a key (`missingKey: 'process'`): the kit's {@link runUnprotected}, timed. */
  #runWithoutKey(delivery: Delivery, scope: string, attempt: number): Promise<RunResult<T>> {
    const span = delivery.span ?? NOOP_MESSAGE_SPAN;
    return runUnprotected<T, KafkaHandlerContext>(
      (context) => span.timeHandler(() => this.handler(context)),
      {
        scope,
        key: undefined,
        fencingToken: 0,
        attempt,
        outcome: 'UNPROTECTED',
        ...this.#brokerFields(delivery),
      },
      this.stopping,
      { handlerTimeoutMs: this.#handlerTimeoutMs() },
    );
  }

  /**
   * A run under `storeFailureMode: 'open'` after a claim the store did not answer: `Idempotency.run`
   * claims once more (no conflict wait) and, when the store still does not answer, emits the runner's
   * `failOpen` event and runs the handler unprotected. That handler gets this adapter's attempt count and
   * a signal that aborts when the wrapper closes or `handlerTimeoutMs` passes (the runner's never does).
   */
  #failOpen(
    delivery: Delivery,
    request: RunRequest,
    runOptions: RunOptions,
    attempt: number,
  ): Promise<RunResult<T>> {
    const span = delivery.span ?? NOOP_MESSAGE_SPAN;
    const broker = this.#brokerFields(delivery);
    return this.idempotency
      .run<T>(
        request,
        (context) =>
          span.timeHandler(() =>
            context.outcome === 'UNPROTECTED'
              ? callUnprotected(
                  (signal) => this.handler({ ...context, ...broker, attempt, signal }),
                  this.stopping,
                  this.#handlerTimeoutMs(),
                  context,
                )
              : this.handler(extendHandlerContext(context, broker)),
          ),
        { ...runOptions, conflictWaitMs: 0 },
      )
      .catch((error: unknown) => this.#unreadableDuplicate(delivery, error));
  }

  /**
   * `Idempotency.settle` of a claim whose handler must not run; a DUPLICATE whose stored result this
   * version cannot decode is settled as a DUPLICATE all the same ({@link MessageProcessor.#unreadableDuplicate}).
   */
  #settle(delivery: Delivery, reply: ClaimReply): Exclude<RunResult<T>, { outcome: 'UNPROTECTED' }> {
    try {
      return this.idempotency.settle<T>(reply);
    } catch (error) {
      return this.#unreadableDuplicate(delivery, error);
    }
  }

  /**
   * A DUPLICATE whose stored result this version cannot decode (`UnreadableResultError`: a newer version's
   * encoding during a rolling upgrade, or corrupt bytes): the operation completed and a consumer never
   * needs the result, so its offset is resolved as any DUPLICATE's, with a `storeError` event (`settle`)
   * and one warning per wrapper (the kit's `unreadableDuplicateOf`), instead of a partition paused for
   * good. @throws `error` itself when it is anything else.
   */
  #unreadableDuplicate(delivery: Delivery, error: unknown): DuplicateResult<never> {
    const duplicate = unreadableDuplicateOf(error, this.log);
    if (!duplicate) throw error;
    this.events.emit('storeError', { operation: 'settle', error, source: sourceOf(delivery) });
    return duplicate;
  }

  /** What a Kafka handler's context adds to the runner's. */
  #brokerFields(
    delivery: Delivery,
  ): Pick<KafkaHandlerContext, 'topic' | 'partition' | 'message' | 'heartbeat'> {
    return {
      topic: delivery.topic,
      partition: delivery.partition,
      message: delivery.message,
      heartbeat: () => delivery.heartbeat(),
    };
  }

  /** The handler time limit of unprotected runs: this wrapper's `handlerTimeoutMs`, else the runner's. */
  #handlerTimeoutMs(): number {
    return this.options.handlerTimeoutMs ?? this.idempotency.options.handlerTimeoutMs;
  }

  /** What happens to a message this wrapper dead-letters, for the warnings: sent where, or dropped. */
  #deadLetterWhat(topic: string, reason: 'missing-key' | 'invalid-key'): string {
    const topicOf = this.options.deadLetterTopicOf;
    return topicOf === false
      ? `dropped (reason ${reason}; deadLetterTopic is false): its offset resolves and the handler does not run`
      : `dead-lettered to ${topicOf(topic)} (reason ${reason})`;
  }

  /**
   * A key the extractor or the store refused (or a payload that cannot be fingerprinted): the
   * `invalidKey` event, and a warning the first time. The message is dead-lettered as `invalid-key`
   * (dropped when `deadLetterTopic` is `false`).
   */
  #invalidKey(delivery: Delivery, subject: MessageSubject, error: string): void {
    this.events.emit('invalidKey', { ...subject, error: new InvalidKeyError(error) });
    this.log.warnOnce(
      'invalid-key',
      `a message on ${delivery.topic} has an invalid idempotency key or payload (${error}); it is ${this.#deadLetterWhat(delivery.topic, 'invalid-key')}. Further ones are reported only by the invalidKey event.`,
      { topic: delivery.topic, partition: delivery.partition, offset: delivery.message.offset },
    );
  }

  /**
   * Emits `leaseLost` for a run whose claim was lost, with where (`during`: the start of a reservation,
   * the heartbeat while the handler ran, the outcome write), as the RabbitMQ and SQS adapters do: reads
   * the record once to say whether it vanished or another claim holds it (`unknown` when the read fails).
   */
  async #reportLeaseLost(
    subject: MessageSubject,
    request: RunRequest,
    result: Extract<RunResult<T>, { status: 'lease-lost' }>,
  ): Promise<void> {
    let reason: LeaseLostReason;
    try {
      const record = await this.idempotency.store.get({ scope: request.scope, key: request.key });
      reason = record === null ? 'record-vanished' : 'taken-over';
    } catch {
      reason = 'unknown';
    }
    this.events.emit('leaseLost', {
      ...subject,
      during: leaseLostDuring(result),
      handlerCompleted: result.handlerCompleted,
      fencingToken: result.fencingToken,
      reason,
    });
  }

  /**
   * After a CONFLICT: waits up to `conflictWaitMs` for the holder's outcome (`Idempotency.waitForOutcome`),
   * heartbeating. Resolves with the reply it ended with, `undefined` when the store stopped answering (the
   * caller claims again, which handles an unavailable store), `unanswered` when it did so after the wait
   * had written a claim it could not give back (`StoreUnavailableError.writtenClaim`: the caller gives it
   * back, see `#claimUnanswered`), or `stop` when the delivery must end: a claim the wait acquired
   * meanwhile is then given back.
   * @throws {@link BrokerHeartbeatFailure} when the broker heartbeat rejects (a rebalance).
   */
  async #waitForHolder(
    delivery: Delivery,
    request: RunRequest,
    runOptions: RunOptions,
    reserve: boolean,
  ): Promise<ClaimReply | undefined | { readonly unanswered: unknown } | 'stop'> {
    const abort = new AbortController();
    const waiting = this.idempotency
      .waitForOutcome(request, {
        ...runOptions,
        conflictWaitMs: this.options.conflictWaitMs,
        signal: abort.signal,
        reserve,
      })
      .catch((error: unknown) => {
        if (!isStoreUnavailable(error)) throw error;
        return writtenClaimOf(error) === undefined ? undefined : { unanswered: error };
      });
    /** The claim the wait ended with, or the one it had written, when the delivery ends first. */
    const held = async () => {
      const ended = await waiting.catch(() => undefined);
      return ended !== undefined && 'unanswered' in ended ? writtenClaimOf(ended.unanswered) : ended;
    };
    let finished: boolean;
    try {
      finished = await heartbeatUntil(waiting, delivery, this.options.brokerHeartbeatIntervalMs);
    } catch (error) {
      abort.abort();
      await this.#giveBack(delivery, request, await held());
      throw new BrokerHeartbeatFailure(error);
    }
    if (!finished) {
      abort.abort();
      await this.#giveBack(delivery, request, await held());
      return 'stop';
    }
    return waiting;
  }

  /**
   * Gives back a claim whose handler never ran (a wait's claim whose delivery ended, a start the store did
   * not answer, a claim a failed call had written: `StoreUnavailableError.writtenClaim`): no attempt spent (the kit's `giveBackUnrun`). Resolves after the first try, or at once
   * while the store gate is closed; a try the store does not answer is made again each time the gate opens,
   * until the wrapper closes (a claim not given back by then lapses with its lease). The release is fenced
   * by the claim's token, so a claim taken over since is left alone.
   */
  #giveBack(
    delivery: Delivery,
    request: RunRequest,
    reply: ClaimReply | WrittenClaim | undefined,
  ): Promise<void> {
    return giveBackUnrun(this.idempotency, idOf(request), reply, {
      gate: this.gate,
      signal: this.stopping,
      onStoreError: (error) =>
        this.events.emit('storeError', { operation: 'release', error, source: sourceOf(delivery) }),
    });
  }

  async #wait(delivery: Delivery, delayMs: number): Promise<boolean> {
    try {
      return await waitHeartbeating(delayMs, delivery, this.options.brokerHeartbeatIntervalMs);
    } catch (error) {
      throw new BrokerHeartbeatFailure(error);
    }
  }

  #subject(
    delivery: Delivery,
    scope: string,
    key: string | undefined,
    outcome: RunOutcome | undefined,
    attempt: number,
  ): MessageSubject {
    return { scope, key, outcome, attempt, source: sourceOf(delivery) };
  }
}

/** Where a delivery's message came from. */
export function sourceOf(delivery: Delivery): KafkaSource {
  return { topic: delivery.topic, partition: delivery.partition, offset: delivery.message.offset };
}

function offsetId(delivery: Delivery): string {
  return `${delivery.topic}/${delivery.partition}/${delivery.message.offset}`;
}

/** The record id of a run request. */
export function idOf(request: RunRequest): { scope: string; key: string } {
  return { scope: request.scope, key: request.key };
}
