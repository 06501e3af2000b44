import {
  type ClaimReply,
  describeError,
  fingerprint,
  type Idempotency,
  isIdempotencyError,
  type RunOptions,
  type RunOutcome,
  type RunRequest,
  type RunResult,
} from '@idempotent-consumer/core';
import { extendHandlerContext, type StoreGate } from '@idempotent-consumer/core/kit';
import { writeCompletion } from './completion-writer';
import { DeadLetterSender } from './dead-letter-sender';
import { type Decision, type DecisionPolicy, decide } from './decide';
import type { KafkaEventEmitter, KafkaEventSubject, KafkaSource, LeaseLostReason } from './events';
import type { KafkaHandler } from './handler';
import { heartbeatUntil, type WaitContext, waitHeartbeating } from './inline-wait';
import type { ResolvedKafkaOptions } from './options';
import type { KafkaMessageLike, ProducerLike } from './types';
import { runUnprotected } from './unprotected-run';

/** One message being handled, and the controls of the delivery it came in. */
export interface Delivery extends WaitContext {
  readonly topic: string;
  readonly partition: number;
  readonly message: KafkaMessageLike;
}

/**
 * How {@link MessageProcessor.process} ended for one message: its offset may resolve, or it stays
 * unresolved with its partition (or, `delayMs` `undefined`, its topic until the store answers) paused, or
 * the delivery ended first (`stop`: the consumer stops, the batch went stale).
 */
export type ProcessEnd =
  | { readonly action: 'resolve' }
  | Extract<Decision, { action: 'pause' }>
  | { readonly action: 'stop' };

/** A message with its key read: a run request, or why there is none. */
export type PreparedMessage =
  | { readonly kind: 'keyed'; readonly request: RunRequest }
  | {
      readonly kind: 'unkeyed';
      readonly scope: string;
      readonly reason: 'missing-key' | 'invalid-key';
      readonly error: string;
    };

/** A rejection of the broker's `heartbeat()` during an inline wait (a rebalance); the wrappers rethrow it. */
export class BrokerHeartbeatFailure {
  constructor(readonly cause: unknown) {}
}

const isStoreUnavailable = (e: unknown) => isIdempotencyError(e) && e.code === 'STORE_UNAVAILABLE';

/** Bound of the per-offset run counts of UNPROTECTED messages kept in memory. */
const MAX_UNPROTECTED_TRACKED = 10_000;

/**
 * Handles one message for the `eachMessage` and `eachBatch` wrappers: claims (or takes the batch's
 * claim), waits for a conflicting holder, runs through the runner, asks {@link decide} what Kafka should
 * see, and carries it out: inline waits (heartbeating), dead-letter sends, the completion write the runner
 * could not make. Anything longer than `maxInlineDelayMs` ends as a pause, left to the wrapper.
 */
export class MessageProcessor<T> {
  readonly #policy: DecisionPolicy;
  readonly #deadLetters: DeadLetterSender;
  /** Runs of UNPROTECTED messages that threw, by `topic/partition/offset`: no record counts them. */
  readonly #unprotectedRuns = new Map<string, number>();

  constructor(
    private readonly idempotency: Idempotency,
    producer: ProducerLike | undefined,
    private readonly options: ResolvedKafkaOptions,
    private readonly handler: KafkaHandler<T>,
    private readonly events: KafkaEventEmitter,
    private readonly gate: StoreGate,
  ) {
    this.#policy = {
      retryBackoff: options.retryBackoff,
      maxInlineDelayMs: options.maxInlineDelayMs,
      maxConflictDelayMs: options.maxConflictDelayMs,
      maxAttempts: options.maxAttempts ?? idempotency.options.maxAttempts,
      isRetryable: idempotency.options.isRetryable,
    };
    this.#deadLetters = new DeadLetterSender(idempotency, producer, options.deadLetterTopicOf, events);
  }

  /** Reads the idempotency key and builds the run request (scope, key, fingerprint of the payload). */
  prepare(topic: string, partition: number, message: KafkaMessageLike): PreparedMessage {
    const scope = this.options.scopeOf(topic);
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
    const payload = this.options.fingerprintOf ? this.options.fingerprintOf(message) : undefined;
    const request: RunRequest =
      payload === undefined ? { scope, key } : { scope, key, fingerprint: fingerprint(payload) };
    return { kind: 'keyed', request };
  }

  /** Per-call options of the runner for one delivery: overrides, and the broker heartbeat with each lease extension. */
  runOptions(delivery: Delivery): RunOptions {
    const options: { leaseMs?: number; maxAttempts?: number; onHeartbeat: () => Promise<void> } = {
      onHeartbeat: () =>
        delivery.heartbeat().catch((error: unknown) => {
          this.events.emit('brokerError', { operation: 'heartbeat', error, source: sourceOf(delivery) });
        }),
    };
    if (this.options.leaseMs !== undefined) options.leaseMs = this.options.leaseMs;
    if (this.options.maxAttempts !== undefined) options.maxAttempts = this.options.maxAttempts;
    return options;
  }

  /**
   * Handles one message to the end or to a pause. `firstReply` is the message's claim when the caller
   * already made it (a batch claim); otherwise it claims. `onHandlerReturned` is called when a run of the
   * handler returned (before its outcome is written): a batch may start the next message's handler then,
   * while this one's completion is being written (each-batch.ts).
   * @throws {@link BrokerHeartbeatFailure} when the broker heartbeat rejects during an inline wait.
   */
  async process(
    delivery: Delivery,
    prepared: PreparedMessage,
    firstReply?: ClaimReply,
    onHandlerReturned?: () => void,
  ): Promise<ProcessEnd> {
    if (prepared.kind === 'unkeyed') {
      const subject = this.#subject(delivery, prepared.scope, undefined, undefined, 0);
      if (prepared.reason === 'missing-key') {
        this.events.emit('missingKey', { ...subject, action: this.options.missingKey });
        if (this.options.missingKey === 'process')
          return this.#unprotected(delivery, prepared.scope, undefined, undefined);
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
        try {
          reply = await this.idempotency.claim(request, runOptions);
        } catch (error) {
          if (isStoreUnavailable(error)) {
            if (this.idempotency.options.storeFailureMode === 'open') {
              return this.#unprotected(delivery, request.scope, request.key, error);
            }
            const answered = await this.awaitStore(delivery, error);
            if (answered === 'stop') return { action: 'stop' };
            if (answered === 'down')
              return { action: 'pause', reason: 'store-unavailable', delayMs: undefined, error };
            continue;
          }
          const subject = this.#subject(delivery, request.scope, request.key, undefined, 0);
          if (isIdempotencyError(error) && error.code === 'INVALID_IDEMPOTENCY_KEY') {
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
        const waited = await this.#waitForHolder(delivery, request, runOptions);
        if (waited === 'stop') return { action: 'stop' };
        reply = waited; // the holder's outcome (or CONFLICT still); `undefined`: the store did not answer
        continue;
      }
      let result: RunResult<T>;
      if (current.outcome === 'ACQUIRED' || current.outcome === 'ACQUIRED_STALE') {
        result = await this.idempotency.execute(
          request,
          current,
          (context) =>
            this.handler(
              extendHandlerContext(context, {
                topic: delivery.topic,
                partition: delivery.partition,
                message: delivery.message,
                heartbeat: () => delivery.heartbeat(),
              }),
            ),
          // The runner says when the handler returned in time (not a late return after a timeout).
          onHandlerReturned ? { ...runOptions, onHandlerReturned } : runOptions,
        );
      } else {
        result = this.idempotency.settle<T>(current);
      }
      const subject = this.#subject(delivery, request.scope, request.key, result.outcome, current.attempt);
      if ('status' in result) {
        if (result.status === 'completed' && !result.recorded) {
          // The handler completed: the offset resolves even if the delivery ends first (a commit that
          // lands then prevents the replay).
          await writeCompletion(
            this.idempotency,
            request,
            current.fencingToken,
            result.result,
            { ...delivery, source: subject.source },
            this.options,
            this.events,
          );
        }
        if (result.status === 'lease-lost' && result.handlerCompleted) {
          await this.#reportLeaseLost(subject, request, current.fencingToken);
        }
      }
      const end = await this.#carryOut(
        delivery,
        { ...subject, attempt: result.attempt },
        decide(result, this.#policy),
      );
      if (end !== 'again') return end;
    }
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
    subject: KafkaEventSubject,
    decision: Decision,
  ): Promise<ProcessEnd | 'again'> {
    if (decision.action !== 'retry') return this.#finish(delivery, subject, decision);
    const { reason, delayMs, error } = decision;
    if (delayMs > 0) {
      this.events.emit('retryScheduled', { ...subject, reason, delayMs, paused: false, error });
      if (!(await this.#wait(delivery, delayMs))) return { action: 'stop' };
    }
    return 'again';
  }

  /**
   * Carries out a decision that ends the message's processing here: `resolve` (emits `settled`),
   * `dead-letter` (sends, then `settled`; a failed produce pauses), `pause` (emits `retryScheduled`,
   * returned to the wrapper to pause).
   */
  async #finish(
    delivery: Delivery,
    subject: KafkaEventSubject,
    decision: Exclude<Decision, { action: 'retry' }>,
  ): Promise<ProcessEnd> {
    switch (decision.action) {
      case 'resolve':
        this.#unprotectedRuns.delete(offsetId(delivery));
        this.events.emit('settled', { ...subject, action: decision.action, reason: decision.reason });
        return { action: 'resolve' };
      case 'dead-letter': {
        if (!(await this.#deadLetters.send(delivery.message, subject, decision))) {
          return this.#finish(delivery, subject, this.#pauseAfterError('dead-letter-failed', undefined));
        }
        this.#unprotectedRuns.delete(offsetId(delivery));
        this.events.emit('settled', { ...subject, action: decision.action, reason: decision.reason });
        return { action: 'resolve' };
      }
      case 'pause': {
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
   * Runs a message without a claim, through {@link runUnprotected}, retrying inline (or by pausing) like a
   * claimed message; its runs are counted here per offset, and bounded by `maxAttempts`.
   */
  async #unprotected(
    delivery: Delivery,
    scope: string,
    key: string | undefined,
    storeError: unknown,
  ): Promise<ProcessEnd> {
    const id = offsetId(delivery);
    for (;;) {
      const attempt = (this.#unprotectedRuns.get(id) ?? 0) + 1;
      const place = {
        scope,
        key,
        topic: delivery.topic,
        partition: delivery.partition,
        message: delivery.message,
        heartbeat: () => delivery.heartbeat(),
      };
      const result = await runUnprotected(this.handler, place, attempt, storeError);
      if (result.status === 'threw') {
        if (this.#unprotectedRuns.size >= MAX_UNPROTECTED_TRACKED) this.#unprotectedRuns.clear();
        this.#unprotectedRuns.set(id, attempt);
      }
      const subject = this.#subject(delivery, scope, key, 'UNPROTECTED', attempt);
      const end = await this.#carryOut(delivery, subject, decide(result, this.#policy, attempt));
      if (end !== 'again') return end;
    }
  }

  /**
   * Emits `leaseLost` for a handler that returned but whose COMPLETED write was refused: reads the record
   * once to say whether it vanished or another claim holds it (`unknown` when the read fails).
   */
  async #reportLeaseLost(
    subject: KafkaEventSubject,
    request: RunRequest,
    fencingToken: number,
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
      during: 'write',
      handlerCompleted: true,
      fencingToken,
      reason,
    });
  }

  /**
   * After a CONFLICT: waits up to `conflictWaitMs` for the holder's outcome (`Idempotency.waitForOutcome`),
   * heartbeating. Resolves with the reply it ended with, `undefined` when the store stopped answering (the
   * caller claims again, which handles an unavailable store), or `stop` when the delivery must end: a
   * claim the wait acquired meanwhile is then given back.
   * @throws {@link BrokerHeartbeatFailure} when the broker heartbeat rejects (a rebalance).
   */
  async #waitForHolder(
    delivery: Delivery,
    request: RunRequest,
    runOptions: RunOptions,
  ): Promise<ClaimReply | undefined | 'stop'> {
    const abort = new AbortController();
    const waiting = this.idempotency
      .waitForOutcome(request, {
        ...runOptions,
        conflictWaitMs: this.options.conflictWaitMs,
        signal: abort.signal,
      })
      .catch((error: unknown) => {
        if (isStoreUnavailable(error)) return undefined;
        throw error;
      });
    let finished: boolean;
    try {
      finished = await heartbeatUntil(waiting, delivery, this.options.brokerHeartbeatIntervalMs);
    } catch (error) {
      abort.abort();
      await this.#giveBack(delivery, request, await waiting.catch(() => undefined));
      throw new BrokerHeartbeatFailure(error);
    }
    if (!finished) {
      abort.abort();
      await this.#giveBack(delivery, request, await waiting.catch(() => undefined));
      return 'stop';
    }
    return waiting;
  }

  /** Releases a claim acquired by a wait whose delivery ended (its attempt stays counted). */
  async #giveBack(delivery: Delivery, request: RunRequest, reply: ClaimReply | undefined): Promise<void> {
    if (reply?.outcome !== 'ACQUIRED' && reply?.outcome !== 'ACQUIRED_STALE') return;
    await this.idempotency.release(idOf(request), reply).catch((error: unknown) => {
      this.events.emit('storeError', { operation: 'release', error, source: sourceOf(delivery) });
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
  ): KafkaEventSubject {
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
