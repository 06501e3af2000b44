import {
  type Idempotency,
  InvalidOptionError,
  type Payload,
  type RunRequest,
} from '@idempotent-consumer/core';
import {
  type AdapterLog,
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
import { DeadLetterSender } from './dead-letter-sender';
import { type Decision, type DecisionPolicy, type RetryReason, toKafkaDecision } from './decide';
import type {
  KafkaIdempotencyEvents as Events,
  KafkaEventEmitter,
  KafkaSource,
  MessageSubject,
} from './events';
import type { KafkaHandler } from './handler';
import { heartbeatUntil, type WaitContext, waitHeartbeating } from './inline-wait';
import type { ResolvedKafkaOptions } from './options';
import { kafkaTelemetry, type TelemetryDelivery } from './telemetry';
import type { KafkaMessageLike, ProducerLike } from './types';

/** One message being handled, and the controls of the delivery it came in. */
export interface Delivery extends WaitContext {
  readonly topic: string;
  readonly partition: number;
  readonly message: KafkaMessageLike;
}

/**
 * How a message ended: its offset may resolve, or it stays unresolved with its partition (or, `delayMs`
 * `undefined`, its topic until the store answers) paused, or the delivery ended first (`stop`).
 */
export type ProcessEnd =
  | {
      readonly action: 'resolve';
      /** The `settled` event's payload: the wrapper emits it once it resolved the offset. */
      readonly settled: Events['settled'][0];
      /** The message's telemetry, still open: the wrapper records whether it resolved the offset. */
      readonly span: MessageSpan;
    }
  | PauseEnd
  | { readonly action: 'stop' };

/** A `pause` end: the decision the wrapper carries out, with the message's telemetry. */
export type PauseEnd = Extract<Decision, { action: 'pause' }> & {
  /** The message's telemetry, still open: the wrapper records whether it paused. */
  readonly span: MessageSpan | undefined;
  /** An error of the adapter itself the span ends with (status ERROR). */
  readonly failure?: unknown;
};

/** The wrapper resolved the offset of a `resolve` end: its broker action is recorded, its span ends. */
export function offsetResolved(end: Extract<ProcessEnd, { action: 'resolve' }>): void {
  end.span.brokerAction(end.settled.decision.action);
  end.span.end();
}

/** The wrapper paused the partition (or the topic) of a `pause` end: recorded, and its span ends. */
export function offsetPaused(end: PauseEnd): void {
  end.span?.brokerAction(end.action);
  end.span?.end(end.failure);
}

/** A `resolve` or `pause` end the batch did not carry out: its span ends without a broker action. */
export function offsetUnresolved(end: ProcessEnd | undefined): void {
  if (end?.action === 'resolve') end.span.end();
  else if (end?.action === 'pause') end.span?.end(end.failure);
}

/**
 * A rejection of the broker's `heartbeat()` during an inline wait (a rebalance); the wrappers rethrow it.
 * It carries the message's telemetry, still open, for the wrapper to end.
 */
export class BrokerHeartbeatFailure {
  constructor(
    readonly cause: unknown,
    readonly span?: MessageSpan,
  ) {}
}

/** What a {@link KafkaPort} is built from. */
export interface KafkaPortParts<T> {
  readonly idempotency: Idempotency;
  readonly producer: ProducerLike | undefined;
  readonly options: ResolvedKafkaOptions;
  readonly handler: KafkaHandler<T>;
  readonly events: KafkaEventEmitter;
  readonly gate: StoreGate;
  readonly log: AdapterLog;
  /** Aborts when the wrapper closes. */
  readonly stopping: AbortSignal;
}

/**
 * Kafka as the pipeline's port, for the `eachMessage` and `eachBatch` wrappers: reads the key (the
 * `idempotency-key` header, else the message key), keeps the consumer in its group while a message waits
 * (`heartbeat()`), waits short retries and the store inline, and sends dead letters. The offset is the
 * wrapper's: it resolves, or pauses the partition, as the {@link ProcessEnd} says.
 */
export class KafkaPort<T> implements MessagePort<Delivery, ProcessEnd> {
  readonly completionBeforeAck = true;
  readonly #parts: KafkaPortParts<T>;
  readonly #policy: DecisionPolicy;
  readonly #deadLetters: DeadLetterSender;
  readonly #telemetry: MessageTelemetry<TelemetryDelivery>;
  readonly #pipeline: MessagePipeline<Delivery, T, ProcessEnd>;
  /** Deliveries with a broker heartbeat in flight: one at a time, never awaited by the lease keeper. */
  readonly #beating = new WeakSet<Delivery>();

  constructor(parts: KafkaPortParts<T>) {
    this.#parts = parts;
    const { options, idempotency, events, stopping } = parts;
    this.#policy = {
      retryBackoff: options.retryBackoff,
      maxInlineDelayMs: options.maxInlineDelayMs,
      maxConflictDelayMs: options.maxConflictDelayMs,
      maxAttempts: options.maxAttempts ?? idempotency.options.maxAttempts,
      isRetryable: idempotency.options.isRetryable,
    };
    this.#deadLetters = new DeadLetterSender(parts.producer, options.deadLetterTopicOf, events, stopping);
    this.#telemetry = kafkaTelemetry(options.groupId, options.telemetry);
    this.#pipeline = new MessagePipeline<Delivery, T, ProcessEnd>({
      idempotency,
      handler: parts.handler as never,
      port: this,
      gate: parts.gate,
      log: parts.log,
      stopping,
      telemetry: { start: (delivery, scope) => this.span(delivery, scope) },
      options: {
        missingKey: options.missingKey,
        overrides: {
          leaseMs: options.leaseMs,
          maxAttempts: options.maxAttempts,
          handlerTimeoutMs: options.handlerTimeoutMs,
          conflictWaitMs: options.conflictWaitMs,
        },
        policy: this.#policy,
      },
    });
  }

  /** The lease of these messages, in milliseconds. */
  get leaseMs(): number {
    return this.#pipeline.leaseMs;
  }

  /** Reads a message's scope, key and payload. Never throws. */
  prepare(delivery: Delivery): Prepared {
    return this.#pipeline.prepare(delivery);
  }

  /** Claims a batch's messages in one round trip, as reservations; a repeated key once. */
  claimBatch(prepared: readonly Prepared[]) {
    return this.#pipeline.claimBatch(prepared, { reserve: true, distinctKeys: true });
  }

  /**
   * Handles one message to the end or to a pause. `claimed` is the message's batch claim, if any.
   * @throws {@link BrokerHeartbeatFailure} when the broker heartbeat rejects during an inline wait.
   */
  process(delivery: Delivery, prepared: Prepared, claimed?: BatchClaim): Promise<ProcessEnd> {
    return this.#pipeline.process(delivery, prepared, claimed);
  }

  /** Starts the telemetry of one message (a batch whose claim the store did not answer, for its first). */
  span(delivery: Delivery, scope: string | undefined): MessageSpan {
    return this.#telemetry.start(delivery, scope);
  }

  /**
   * The store did not answer: waits inline, heartbeating, up to `maxInlineDelayMs` in all for the store
   * gate's probe to answer. @throws {@link BrokerHeartbeatFailure} when the broker heartbeat rejects.
   */
  async waitForStore(delivery: Delivery): Promise<'up' | 'down' | 'stop'> {
    const abort = new AbortController();
    const open = this.#parts.gate.waitUntilOpenWithin(this.#parts.options.maxInlineDelayMs, abort.signal);
    try {
      if (!(await this.keepAlive(delivery, open))) return 'stop';
    } finally {
      abort.abort();
    }
    return (await open) ? 'up' : 'down';
  }

  scopeOf(delivery: Delivery): string {
    const scope: unknown = this.#parts.options.scopeOf(delivery.topic);
    if (typeof scope !== 'string' || scope === '') {
      // A function from plain JavaScript: ended like one that throws, not a TypeError out of eachBatch.
      const what = typeof scope === 'string' ? 'an empty string' : typeof scope;
      throw new InvalidOptionError(
        `the scope function returned ${what} for topic ${delivery.topic}; it must return a non-empty string`,
      );
    }
    return scope;
  }

  keyOf(delivery: Delivery): string | undefined {
    const { topic, partition, message } = delivery;
    return this.#parts.options.idempotencyKey(message, { topic, partition });
  }

  payloadOf(delivery: Delivery): Payload | undefined {
    const { fingerprintOf } = this.#parts.options;
    return fingerprintOf ? fingerprintOf(delivery.message) : undefined;
  }

  handlerFields(delivery: Delivery): object {
    const { topic, partition, message } = delivery;
    return { topic, partition, message, heartbeat: () => delivery.heartbeat() };
  }

  subject(delivery: Delivery, fields: SubjectFields): MessageSubject {
    return { ...fields, source: sourceOf(delivery) };
  }

  storeError(operation: string, error: unknown, delivery: Delivery | undefined): object {
    return { operation, error, source: delivery && sourceOf(delivery) };
  }

  warningWords(delivery: Delivery): WarningWords {
    const topicOf = this.#parts.options.deadLetterTopicOf;
    return {
      where: `on ${delivery.topic}`,
      unacknowledged: `${delivery.topic}[${delivery.partition}]@${delivery.message.offset} stays unresolved and is fetched again`,
      keySource: 'by default the idempotency-key header, else the Kafka message key',
      advice: '',
      deadLetter: (reason) =>
        topicOf === false
          ? `dropped (reason ${reason}; deadLetterTopic is false): its offset resolves and the handler does not run`
          : `dead-lettered to ${topicOf(delivery.topic)} (reason ${reason})`,
    };
  }

  emit(name: string, payload: object): void {
    (this.#parts.events.emit as (name: string, payload: object) => void).call(
      this.#parts.events,
      name,
      payload,
    );
  }

  deliveryId(delivery: Delivery): string {
    return `${delivery.topic}/${delivery.partition}/${delivery.message.offset}`;
  }

  /**
   * Sends the broker heartbeat with each lease extension, not awaited and one at a time: KafkaJS's
   * heartbeat waits on the group coordinator, and an awaited one that hangs would stop the extensions.
   */
  extendTimer(delivery: Delivery): void {
    if (this.#beating.has(delivery)) return;
    this.#beating.add(delivery);
    delivery
      .heartbeat()
      .catch((error: unknown) => {
        this.#parts.events.emit('brokerError', { operation: 'heartbeat', error, source: sourceOf(delivery) });
      })
      .finally(() => this.#beating.delete(delivery));
  }

  /** Heartbeats while `work` runs; `false` when the delivery ended first. */
  async keepAlive(delivery: Delivery, work: Promise<unknown>): Promise<boolean> {
    const shouldStop = () => this.#parts.stopping.aborted || delivery.shouldStop();
    try {
      return await heartbeatUntil(
        work,
        { heartbeat: () => delivery.heartbeat(), shouldStop },
        this.#parts.options.brokerHeartbeatIntervalMs,
      );
    } catch (error) {
      throw new BrokerHeartbeatFailure(error);
    }
  }

  retryInline(
    delivery: Delivery,
    decision: { readonly reason: RetryReason; readonly delayMs: number; readonly error: unknown },
    subject: SubjectFields,
  ): Promise<'again' | 'stop'> | undefined {
    const kafka = toKafkaDecision({ action: 'retry', attempt: 0, ...decision }, this.#policy);
    if (kafka === 'stop' || kafka.action !== 'retry') return undefined;
    const { reason, delayMs, error } = kafka;
    if (delayMs <= 0) return Promise.resolve('again');
    this.#parts.events.emit('retryScheduled', {
      ...this.subject(delivery, subject),
      reason,
      delayMs,
      paused: false,
      error,
    });
    return this.#wait(delivery, delayMs);
  }

  brokerFailure(error: unknown, span: MessageSpan): unknown {
    return error instanceof BrokerHeartbeatFailure
      ? new BrokerHeartbeatFailure(error.cause, span)
      : undefined;
  }

  async carryOut(delivery: Delivery, end: MessageEnd<unknown>): Promise<CarriedOut<ProcessEnd>> {
    const subject = this.subject(delivery, end.subject);
    const kafka = toKafkaDecision(end.decision, this.#policy);
    if (kafka === 'stop') return this.#stopped(end);
    switch (kafka.action) {
      case 'resolve':
        return {
          done: true,
          result: { action: 'resolve', settled: { ...subject, decision: kafka }, span: end.span },
        };
      case 'dead-letter': {
        const sent = await this.#deadLetters.send(delivery.message, subject, kafka, end.markDeadLettered);
        if (sent === 'sent') {
          return {
            done: true,
            result: { action: 'resolve', settled: { ...subject, decision: kafka }, span: end.span },
          };
        }
        if (sent === 'stopped') return this.#stopped(end);
        const delayMs = this.#policy.retryBackoff.baseMs ?? 1000;
        return this.#paused(
          subject,
          { action: 'pause', reason: 'dead-letter-failed', delayMs, error: undefined },
          end,
        );
      }
      case 'retry':
      case 'pause':
        // A retry reaches here only when it was not waited inline: the delivery ended during the wait.
        if (kafka.action === 'retry') return this.#stopped(end);
        return this.#paused(subject, kafka, end);
    }
  }

  /** A pause: `retryScheduled` (but for a store outage), and the end for the wrapper to carry out. */
  #paused(
    subject: MessageSubject,
    pause: Extract<Decision, { action: 'pause' }>,
    end: MessageEnd<unknown>,
  ): CarriedOut<ProcessEnd> {
    const { reason, delayMs, error } = pause;
    if (reason !== 'store-unavailable' && delayMs !== undefined) {
      this.#parts.events.emit('retryScheduled', { ...subject, reason, delayMs, paused: true, error });
    }
    const failure =
      end.decision.action === 'leave' && end.decision.reason === 'error' ? end.error : undefined;
    return {
      done: false,
      result: { ...pause, span: end.span, ...(failure === undefined ? {} : { failure }) },
    };
  }

  #stopped(end: MessageEnd<unknown>): CarriedOut<ProcessEnd> {
    end.span.end();
    return { done: false, result: { action: 'stop' } };
  }

  async #wait(delivery: Delivery, delayMs: number): Promise<'again' | 'stop'> {
    const shouldStop = () => this.#parts.stopping.aborted || delivery.shouldStop();
    try {
      const waited = await waitHeartbeating(
        delayMs,
        { heartbeat: () => delivery.heartbeat(), shouldStop },
        this.#parts.options.brokerHeartbeatIntervalMs,
      );
      return waited ? 'again' : 'stop';
    } catch (error) {
      throw new BrokerHeartbeatFailure(error);
    }
  }
}

/** Where a delivery's message came from. */
export function sourceOf(delivery: Delivery): KafkaSource {
  return { topic: delivery.topic, partition: delivery.partition, offset: delivery.message.offset };
}

/** The record id of a run request. */
export function idOf(request: RunRequest): { scope: string; key: string } {
  return { scope: request.scope, key: request.key };
}
