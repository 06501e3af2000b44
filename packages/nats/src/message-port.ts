import { performance } from 'node:perf_hooks';
import type { Idempotency, Payload } from '@idempotent-consumer/core';
import {
  type AdapterLog,
  type CarriedOut,
  type MessageEnd,
  MessagePipeline,
  type MessagePort,
  type MessageSpan,
  type MessageTelemetry,
  type StoreGate,
  type SubjectFields,
  type TypedEventEmitter,
  type WarningWords,
} from '@idempotent-consumer/core/kit';
import type { JetStreamClient, JsMsg } from '@nats-io/jetstream';
import { type DeadLetterTarget, publishDeadLetter } from './dead-letter';
import { type Decision, type DecisionPolicy, type NakReason, toNatsDecision } from './decide';
import type { MessageSubject, NatsIdempotencyEvents, NatsSource } from './events';
import type { NatsHandler } from './handler';
import type { ResolvedNatsOptions } from './options';
import { natsTelemetry } from './telemetry';

/** What `start()` read from JetStream: the consumer's timers and the dead-letter stream. */
export interface JetStreamLimits {
  /** The consumer's `ack_wait`, in milliseconds. */
  readonly ackWaitMs: number;
  /** The consumer's `max_deliver`; -1 for no limit. */
  readonly maxDeliver: number;
  readonly deadLetter: DeadLetterTarget;
}

/** What a {@link NatsMessagePort} is built from. */
export interface NatsPortParts<T> {
  readonly idempotency: Idempotency;
  readonly jetstream: JetStreamClient;
  readonly options: ResolvedNatsOptions;
  readonly limits: JetStreamLimits;
  readonly handler: NatsHandler<T>;
  readonly events: TypedEventEmitter<NatsIdempotencyEvents>;
  readonly gate: StoreGate;
  readonly log: AdapterLog;
  /** Aborts when the consumer stops: no handler starts, waits end. */
  readonly stopping: AbortSignal;
  /** Aborts when `stop()` gives up on the messages in flight. */
  readonly abandoning: AbortSignal;
}

/** Nak reasons that are no retry of the message's own: no `retryScheduled` for them. */
const NOT_RETRIES: readonly NakReason[] = ['store-unavailable', 'stopping'];

/**
 * JetStream as the pipeline's port: reads the key (`Nats-Msg-Id`), keeps `ack_wait` from lapsing with
 * `working()` on every lease heartbeat and during the pipeline's waits, and carries out each decision:
 * `ack`, `nak(delay)`, or a dead-letter copy then `term()`.
 */
export class NatsMessagePort<T> implements MessagePort<JsMsg> {
  readonly #parts: NatsPortParts<T>;
  readonly #policy: DecisionPolicy;
  readonly #telemetry: MessageTelemetry<JsMsg>;
  readonly #pipeline: MessagePipeline<JsMsg, T>;
  /** The messages being processed, with their span once started. */
  readonly #current = new Map<JsMsg, MessageSpan | undefined>();
  /** When each message reached {@link NatsMessagePort.process}. */
  readonly #arrived = new WeakMap<JsMsg, number>();
  /** Messages `stop()` gave up on: nothing more is sent for them. */
  readonly #abandoned = new WeakSet<JsMsg>();

  constructor(parts: NatsPortParts<T>) {
    this.#parts = parts;
    const { options, idempotency, limits } = parts;
    this.#policy = { maxDeliver: limits.maxDeliver, requeueDelayMs: options.retryBackoff.baseMs ?? 1000 };
    this.#telemetry = natsTelemetry(options.stream, options.consumer, options.telemetry);
    this.#pipeline = new MessagePipeline<JsMsg, T>({
      idempotency,
      handler: parts.handler as never,
      port: this,
      gate: parts.gate,
      log: parts.log,
      stopping: parts.stopping,
      abandoning: parts.abandoning,
      telemetry: {
        start: (message, scope) => {
          const span = this.#telemetry.start(message, scope);
          this.#current.set(message, span);
          return span;
        },
      },
      options: {
        missingKey: options.missingKey,
        overrides: options.overrides,
        policy: {
          retryBackoff: options.retryBackoff,
          maxConflictDelayMs: options.maxConflictDelayMs,
          maxAttempts: options.overrides.maxAttempts ?? idempotency.options.maxAttempts,
          isRetryable: idempotency.options.isRetryable,
        },
        lateCompletionClosesGate: true,
      },
    });
  }

  /** Processes one message to its end; never rejects. */
  async process(message: JsMsg): Promise<void> {
    this.#current.set(message, undefined);
    this.#arrived.set(message, performance.now());
    try {
      await this.#pipeline.process(message, this.#pipeline.prepare(message));
    } catch (error) {
      // Never a handler error (the runner catches those): an error of this adapter.
      this.#brokerError('process', error, message);
      const span = this.#current.get(message) ?? this.#telemetry.start(message, this.#parts.options.scope);
      const nak = { action: 'nak', reason: 'error', delayMs: this.#policy.requeueDelayMs } as const;
      this.#settle(message, span, this.#unclaimed(message), nak, error, error);
    } finally {
      this.#current.delete(message);
    }
  }

  /** A message the consumer does not run (stopping, or the store is down): nak'ed and reported. */
  notRun(message: JsMsg, reason: 'stopping' | 'store-unavailable'): void {
    const span = this.#telemetry.start(message, this.#parts.options.scope);
    const delayMs = reason === 'stopping' ? 0 : this.#policy.requeueDelayMs;
    this.#settle(message, span, this.#unclaimed(message), { action: 'nak', reason, delayMs }, undefined);
  }

  /**
   * `stop()` gave up on the messages in flight: each is reported `settled` with `leave`/`abandoned`, and
   * nothing more is sent for it. @returns how many.
   */
  abandon(): number {
    const abandoned = [...this.#current];
    for (const [message, span] of abandoned) {
      this.#abandoned.add(message);
      this.#report(message, span, this.#unclaimed(message), { action: 'leave', reason: 'abandoned' });
    }
    return abandoned.length;
  }

  scopeOf(): string {
    return this.#parts.options.scope;
  }

  keyOf(message: JsMsg): string | undefined {
    return this.#parts.options.idempotencyKey(message);
  }

  payloadOf(message: JsMsg): Payload | undefined {
    return this.#parts.options.payload(message);
  }

  handlerFields(message: JsMsg): object {
    return { message };
  }

  subject(message: JsMsg, fields: SubjectFields): MessageSubject {
    return { ...fields, source: sourceOf(message) };
  }

  storeError(operation: string, error: unknown, message: JsMsg | undefined): object {
    const { stream, consumer } = this.#parts.options;
    return { stream, consumer, operation, error, source: message && sourceOf(message) };
  }

  warningWords(): WarningWords {
    const { stream, consumer, deadLetterSubject } = this.#parts.options;
    return {
      where: `on stream ${stream} (consumer ${consumer})`,
      unacknowledged: 'the message is delivered again after ack_wait',
      keySource: 'by default the Nats-Msg-Id header',
      advice: ' Set msgID when publishing, or pass idempotencyKey.',
      deadLetter: (reason) => `dead-lettered (reason ${reason}) to ${deadLetterSubject}`,
    };
  }

  emit(name: string, payload: object): void {
    (this.#parts.events.emit as (name: string, payload: object) => void)(name, payload);
  }

  deliveryId(message: JsMsg): string {
    return `${message.info.stream}/${message.seq}`;
  }

  /** The deliveries before this one: JetStream counts every run. */
  priorRuns(message: JsMsg): number {
    return message.info.deliveryCount - 1;
  }

  /** `working()` with each lease extension: `ack_wait` starts over. */
  extendTimer(message: JsMsg): void {
    this.#working(message);
  }

  /** `working()` every third of `ack_wait` while the pipeline waits for `work`. */
  async keepAlive(message: JsMsg, work: Promise<unknown>): Promise<boolean> {
    this.#working(message);
    const timer = setInterval(() => this.#working(message), Math.max(1, this.#parts.limits.ackWaitMs / 3));
    try {
      await work.catch(() => {});
    } finally {
      clearInterval(timer);
    }
    return !this.#abandoned.has(message);
  }

  /** A message that waited a third of `ack_wait` (in the pull buffer, for a holder) gets it back first. */
  async beforeRun(message: JsMsg): Promise<void> {
    const waitedMs = performance.now() - (this.#arrived.get(message) ?? 0);
    if (waitedMs >= this.#parts.limits.ackWaitMs / 3) this.#working(message);
  }

  admission(message: JsMsg): 'run' | 'stopping' | 'abandoned' {
    if (this.#abandoned.has(message)) return 'abandoned';
    return this.#parts.stopping.aborted ? 'stopping' : 'run';
  }

  async carryOut(message: JsMsg, end: MessageEnd<unknown>): Promise<CarriedOut<void>> {
    if (this.#abandoned.has(message)) {
      end.span.end();
      return { done: false, result: undefined };
    }
    const subject = this.subject(message, end.subject);
    let decision = toNatsDecision(end.decision, message.info.deliveryCount, this.#policy);
    if (decision.action === 'dead-letter') decision = await this.#deadLetter(message, decision, subject, end);
    const error = end.decision.action === 'retry' ? end.decision.error : end.error;
    const failure =
      end.decision.action === 'leave' && end.decision.reason === 'error' ? end.error : undefined;
    this.#settle(message, end.span, subject, decision, error, failure);
    const failed = decision.action === 'nak' && decision.reason === 'dead-letter-failed';
    return { done: !failed, result: undefined };
  }

  /** Sends the decision, reports it and ends the span. */
  #settle(
    message: JsMsg,
    span: MessageSpan,
    subject: MessageSubject,
    decision: Decision,
    error: unknown,
    failure?: unknown,
  ): void {
    this.#send(message, decision);
    if (decision.action === 'nak' && !NOT_RETRIES.includes(decision.reason)) {
      const { reason, delayMs } = decision;
      this.#parts.events.emit('retryScheduled', { ...subject, reason, delayMs, error });
    }
    this.#report(message, span, subject, decision, failure);
  }

  #report(
    message: JsMsg,
    span: MessageSpan | undefined,
    subject: MessageSubject,
    decision: Decision,
    failure?: unknown,
  ) {
    span?.brokerAction(decision.action);
    span?.end(failure);
    this.#current.delete(message);
    this.#parts.events.emit('settled', { ...subject, decision });
  }

  /** Publishes the dead letter; a failed publish becomes a `nak`, its message tried again later. */
  async #deadLetter(
    message: JsMsg,
    decision: Extract<Decision, { action: 'dead-letter' }>,
    subject: MessageSubject,
    end: MessageEnd<unknown>,
  ): Promise<Decision> {
    const { jetstream, limits, log } = this.#parts;
    try {
      await publishDeadLetter(jetstream, limits.deadLetter, message, decision, subject);
    } catch (error) {
      this.#brokerError('dead-letter', error, message);
      log.warnOnce(
        'dead-letter-failed',
        `a dead letter could not be published to ${limits.deadLetter.subject} (${String(error)}); the message is nak'ed and tried again. Further failures are reported only by the brokerError event.`,
      );
      return { action: 'nak', reason: 'dead-letter-failed', delayMs: this.#policy.requeueDelayMs };
    }
    await end.markDeadLettered();
    const { reason, error } = decision;
    this.#parts.events.emit('deadLettered', {
      ...subject,
      reason,
      error,
      destination: limits.deadLetter.subject,
    });
    return decision;
  }

  /** The JetStream action of a decision; a call the client refuses (connection closed) is a `brokerError`. */
  #send(message: JsMsg, decision: Decision): void {
    try {
      if (decision.action === 'ack') message.ack();
      else if (decision.action === 'nak') message.nak(decision.delayMs);
      else if (decision.action === 'dead-letter') message.term();
    } catch (error) {
      this.#brokerError(decision.action === 'dead-letter' ? 'term' : decision.action, error, message);
    }
  }

  #working(message: JsMsg): void {
    if (this.#abandoned.has(message)) return;
    try {
      message.working();
    } catch (error) {
      this.#brokerError('working', error, message);
    }
  }

  /** The subject of a message before any claim. */
  #unclaimed(message: JsMsg): MessageSubject {
    let key: string | undefined;
    try {
      key = this.keyOf(message) || undefined;
    } catch {
      // An extractor that throws: reported by the pipeline when the message runs.
    }
    return this.subject(message, { scope: this.#parts.options.scope, key, outcome: undefined, attempt: 0 });
  }

  #brokerError(operation: string, error: unknown, message: JsMsg): void {
    const { stream, consumer } = this.#parts.options;
    this.#parts.events.emit('brokerError', { stream, consumer, operation, error, source: sourceOf(message) });
  }
}

/** Where a message came from. */
export function sourceOf(message: JsMsg): NatsSource {
  const { stream, consumer, deliveryCount } = message.info;
  return { stream, consumer, subject: message.subject, streamSequence: message.seq, deliveryCount };
}
