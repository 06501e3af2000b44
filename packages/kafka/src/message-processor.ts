import {
  type ClaimReply,
  computeBackoffMs,
  type DeadLetterReason,
  deadLetterReasonOf,
  describeError,
  encodeResult,
  fingerprint,
  type Idempotency,
  isIdempotencyError,
  type RunOptions,
  type RunOutcome,
  type RunRequest,
} from '@idempotent-consumer/core';
import { buildDeadLetter } from './dead-letter';
import type { PauseReason } from './events';
import type { KafkaHandler } from './handler';
import type { ResolvedKafkaOptions } from './options';
import { type WaitContext, waitHeartbeating } from './sleep';
import type { KafkaMessageLike, ProducerLike } from './types';

/** One message being handled, and the controls of the delivery it came in. */
export interface Delivery extends WaitContext {
  readonly topic: string;
  readonly partition: number;
  readonly message: KafkaMessageLike;
}

/** What the broker should do with a message after {@link MessageProcessor.process}. */
export type Decision =
  | {
      /** Let the offset resolve: the handler completed, or the message is a proven duplicate or dead letter. */
      readonly action: 'resolve';
      readonly via: 'completed' | 'duplicate' | 'dead-lettered' | 'unprotected';
    }
  /** Leave the offset unresolved and pause the partition for `delayMs`. */
  | { readonly action: 'pause'; readonly reason: PauseReason; readonly delayMs: number }
  /** Leave the offset unresolved and pause until the store answers (fail closed). */
  | { readonly action: 'await-store' }
  /** Leave the offset unresolved: the consumer stops or the batch went stale. */
  | { readonly action: 'stop' };

/** A message with its key read: a run request, or why there is none. */
export type PreparedMessage =
  | { readonly kind: 'keyed'; readonly request: RunRequest }
  | {
      readonly kind: 'unkeyed';
      readonly scope: string;
      readonly reason: Extract<DeadLetterReason, 'missing-key' | 'invalid-key'>;
      readonly error: string;
    };

/** A rejection of the broker's `heartbeat()` during an inline wait (a rebalance); the wrappers rethrow it. */
export class BrokerHeartbeatFailure {
  constructor(readonly cause: unknown) {}
}

const isStoreUnavailable = (e: unknown) => isIdempotencyError(e) && e.code === 'STORE_UNAVAILABLE';

/**
 * The Kafka column of DESIGN.md's outcome table for one message, shared by the `eachMessage` and
 * `eachBatch` wrappers: claim (or take the batch's claim), run and complete, wait for a conflicting holder,
 * retry after a backoff, dead-letter. Short waits happen inline (heartbeating); anything longer becomes a
 * {@link Decision} to pause the partition without resolving the offset.
 */
export class MessageProcessor<T> {
  constructor(
    private readonly idempotency: Idempotency,
    private readonly producer: ProducerLike | undefined,
    private readonly options: ResolvedKafkaOptions,
    private readonly handler: KafkaHandler<T>,
  ) {}

  /** Reads the idempotency key and builds the run request (scope, key, fingerprint of the value). */
  prepare(topic: string, partition: number, message: KafkaMessageLike): PreparedMessage {
    const scope = this.options.scopeOf(topic);
    let key: string | undefined;
    try {
      key = this.options.key(message, { topic, partition });
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
    const request: RunRequest = this.options.comparePayload
      ? { scope, key, fingerprint: fingerprint(message.value ?? new Uint8Array(0)) }
      : { scope, key };
    return { kind: 'keyed', request };
  }

  /** Per-call options of the runner for one delivery: overrides, and the broker heartbeat with each lease extension. */
  runOptions(delivery: Delivery): RunOptions {
    const options: { leaseMs?: number; maxAttempts?: number; onHeartbeat: () => Promise<void> } = {
      onHeartbeat: () =>
        delivery.heartbeat().catch((error: unknown) => {
          this.options.onEvent({ type: 'error', operation: 'heartbeat', error });
        }),
    };
    if (this.options.leaseMs !== undefined) options.leaseMs = this.options.leaseMs;
    if (this.options.maxAttempts !== undefined) options.maxAttempts = this.options.maxAttempts;
    return options;
  }

  /**
   * Handles one message to the end or to a decision to pause. `firstReply` is the message's claim when
   * the caller already made it (a batch claim); otherwise it claims.
   * @throws {@link BrokerHeartbeatFailure} when the broker heartbeat rejects during an inline wait.
   */
  async process(delivery: Delivery, prepared: PreparedMessage, firstReply?: ClaimReply): Promise<Decision> {
    if (prepared.kind === 'unkeyed') {
      if (prepared.reason === 'missing-key' && this.options.missingKey === 'process') {
        return this.#runUnprotected(delivery, prepared.scope);
      }
      return this.deadLetter(delivery, prepared.scope, undefined, prepared.reason, prepared.error, 0);
    }
    const { request } = prepared;
    const runOptions = this.runOptions(delivery);
    let reply = firstReply;
    let conflictWaitedMs = 0;
    for (;;) {
      if (reply === undefined) {
        try {
          reply = await this.idempotency.claim(request, runOptions);
        } catch (error) {
          if (isStoreUnavailable(error)) {
            const answered = await this.waitForStore(delivery);
            if (answered === 'stop') return { action: 'stop' };
            if (answered === 'down') return { action: 'await-store' };
            continue;
          }
          if (isIdempotencyError(error) && error.code === 'INVALID_IDEMPOTENCY_KEY') {
            return this.deadLetter(
              delivery,
              request.scope,
              request.key,
              'invalid-key',
              describeError(error),
              0,
            );
          }
          this.options.onEvent({ type: 'error', operation: 'claim', error });
          return { action: 'pause', reason: 'store-error', delayMs: this.#backoff(1) };
        }
      }
      const current: ClaimReply = reply;
      reply = undefined;
      switch (current.outcome) {
        case 'DUPLICATE':
          return { action: 'resolve', via: 'duplicate' };
        case 'PAYLOAD_MISMATCH':
          return this.deadLetter(
            delivery,
            request.scope,
            request.key,
            deadLetterReasonOf(current)!,
            `PayloadMismatch: the idempotency key was first used with another payload (record ${current.state})`,
            current.attempt,
            current.outcome,
          );
        case 'FAILED':
          return this.deadLetter(
            delivery,
            request.scope,
            request.key,
            deadLetterReasonOf(current)!,
            current.error,
            current.attempt,
            current.outcome,
          );
        case 'CONFLICT': {
          const left = this.options.conflictWaitMs - conflictWaitedMs;
          if (left <= 0) {
            const delayMs = Math.max(
              100,
              Math.min(current.remainingLeaseMs, this.options.retryBackoff.maxMs ?? 60_000),
            );
            return { action: 'pause', reason: 'conflict', delayMs };
          }
          const delayMs = Math.min(left, this.options.conflictPollIntervalMs);
          conflictWaitedMs += delayMs;
          if (!(await this.#wait(delivery, delayMs, 'conflict'))) return { action: 'stop' };
          continue;
        }
        default: {
          const result = await this.idempotency.execute(
            request,
            current,
            (context) =>
              this.handler({
                ...context,
                topic: delivery.topic,
                partition: delivery.partition,
                message: delivery.message,
                heartbeat: () => delivery.heartbeat(),
              }),
            runOptions,
          );
          switch (result.status) {
            case 'completed':
              // Not recorded: write it ourselves, heartbeating. Even if the delivery ends first, the handler
              // completed, so the offset resolves (a commit that lands then prevents the replay).
              if (!result.recorded)
                await this.#recordCompletion(delivery, request, current.fencingToken, result.result);
              return { action: 'resolve', via: 'completed' };
            case 'failed':
              return this.deadLetter(
                delivery,
                request.scope,
                request.key,
                deadLetterReasonOf(result)!,
                describeError(result.error),
                result.attempt,
                result.outcome,
              );
            case 'released': {
              const delayMs = this.#backoff(result.attempt);
              if (delayMs > this.options.maxInlineDelayMs)
                return { action: 'pause', reason: 'retry', delayMs };
              if (!(await this.#wait(delivery, delayMs, 'retry'))) return { action: 'stop' };
              continue;
            }
            case 'lease-lost':
              // Another worker claimed the key after our lease lapsed: its outcome rules; claim again.
              continue;
          }
        }
      }
    }
  }

  /**
   * The handler completed but the runner could not write COMPLETED (the store stayed unavailable through
   * its `writeAttempts`). Resolving the offset now would let a rebalance or a crash before the next commit
   * replay a message whose record is still IN_PROGRESS, and run it again once the lease lapses. So the
   * completion is written here, retried every `storeProbeIntervalMs` while heartbeating, until the store
   * takes it (fenced by the claim's token; an expired lease that nobody took over still accepts it).
   * @returns false when the delivery had to end first (the consumer stops, the batch went stale).
   */
  async #recordCompletion(
    delivery: Delivery,
    request: RunRequest,
    fencingToken: number,
    value: T,
  ): Promise<boolean> {
    let encoded: string | undefined;
    try {
      const e = encodeResult(value, this.idempotency.options);
      encoded = e.kind === 'stored' ? e.value : undefined;
    } catch {
      encoded = undefined;
    }
    const id = { scope: request.scope, key: request.key };
    const retentionMs = this.idempotency.options.retentionMs;
    for (;;) {
      try {
        await this.idempotency.store.complete(id, fencingToken, { retentionMs, result: encoded });
        return true; // written, or LEASE_LOST: another worker took the key over and its outcome rules
      } catch (error) {
        if (!isStoreUnavailable(error)) {
          this.options.onEvent({ type: 'error', operation: 'complete', error });
          return true;
        }
      }
      if (!(await this.#wait(delivery, this.options.storeProbeIntervalMs, 'store-unavailable'))) return false;
    }
  }

  /**
   * Waits inline, up to `maxInlineDelayMs`, for the store to answer a ping.
   * @returns `up` when it answered, `down` when it still does not, `stop` when the delivery must end.
   */
  async waitForStore(delivery: Delivery): Promise<'up' | 'down' | 'stop'> {
    const budget = this.options.maxInlineDelayMs;
    let waited = 0;
    while (waited < budget) {
      const step = Math.min(this.options.storeProbeIntervalMs, budget - waited);
      waited += step;
      if (!(await this.#wait(delivery, step, 'store-unavailable'))) return 'stop';
      try {
        await this.idempotency.store.ping();
        return 'up';
      } catch {
        // still down
      }
    }
    return 'down';
  }

  /**
   * Sends the message to the dead-letter topic (or only reports it when dead-lettering is off) and lets
   * its offset resolve; pauses instead when the produce fails, so nothing is lost. `outcome`: the claim
   * outcome, `undefined` when no claim was made (missing or invalid key).
   */
  async deadLetter(
    delivery: Delivery,
    scope: string,
    key: string | undefined,
    reason: DeadLetterReason,
    error: string,
    attempt: number,
    outcome?: RunOutcome,
  ): Promise<Decision> {
    const { topic, partition, message } = delivery;
    const topicOf = this.options.deadLetterTopicOf;
    const deadLetterTopic = topicOf ? topicOf(topic) : null;
    if (deadLetterTopic !== null) {
      try {
        const letter = buildDeadLetter({
          topic,
          partition,
          message,
          reason,
          outcome,
          error,
          attempt,
          scope,
          key,
        });
        await this.producer!.send({ topic: deadLetterTopic, messages: [letter] });
      } catch (sendError) {
        this.options.onEvent({ type: 'error', operation: 'dead-letter', error: sendError });
        return { action: 'pause', reason: 'dead-letter-failed', delayMs: this.#backoff(1) };
      }
    }
    this.options.onEvent({
      type: 'dead-lettered',
      topic,
      partition,
      offset: message.offset,
      deadLetterTopic,
      reason,
      attempt,
      error,
    });
    return { action: 'resolve', via: 'dead-lettered' };
  }

  async #runUnprotected(delivery: Delivery, scope: string): Promise<Decision> {
    try {
      await this.handler({
        scope,
        key: '',
        fencingToken: 0,
        attempt: 0,
        outcome: 'ACQUIRED',
        signal: new AbortController().signal,
        topic: delivery.topic,
        partition: delivery.partition,
        message: delivery.message,
        heartbeat: () => delivery.heartbeat(),
      });
      return { action: 'resolve', via: 'unprotected' };
    } catch (error) {
      this.options.onEvent({ type: 'error', operation: 'unprotected-handler', error });
      return { action: 'pause', reason: 'retry', delayMs: this.#backoff(1) };
    }
  }

  async #wait(
    delivery: Delivery,
    delayMs: number,
    reason: 'conflict' | 'retry' | 'store-unavailable',
  ): Promise<boolean> {
    this.options.onEvent({
      type: 'waiting',
      topic: delivery.topic,
      partition: delivery.partition,
      offset: delivery.message.offset,
      reason,
      delayMs,
    });
    try {
      return await waitHeartbeating(delayMs, delivery, this.options.brokerHeartbeatIntervalMs);
    } catch (error) {
      throw new BrokerHeartbeatFailure(error);
    }
  }

  #backoff(attempt: number): number {
    return computeBackoffMs(attempt, this.options.retryBackoff);
  }
}
