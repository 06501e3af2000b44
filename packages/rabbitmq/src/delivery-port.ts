import { createHash } from 'node:crypto';
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
  type WarningWords,
} from '@idempotent-consumer/core/kit';
import type { ConsumeMessage } from 'amqplib';
import type { ConsumeChannel } from './amqp-types';
import { type DecisionPolicy, toRabbitMqDecision } from './decide';
import type { Delivery, DeliveryActions } from './delivery-actions';
import type { Emit, MessageSubject, RabbitMqSource } from './events';
import type { RabbitMqHandler } from './handler';
import { attemptFromHeaders, IDEMPOTENCY_KEY_HEADER } from './headers';
import type { ResolvedConsumerOptions } from './options';

/** One delivery on its way through the pipeline. */
export interface Incoming {
  readonly message: ConsumeMessage;
  /** The channel it came on: its delivery tag means something only there. */
  readonly channel: ConsumeChannel;
  /** Its idempotency key, once read. */
  key?: string;
  /** Its telemetry, once started. */
  span?: MessageSpan;
}

/** What a {@link DeliveryPort} works with. */
export interface DeliveryPortContext<T> {
  readonly idempotency: Idempotency;
  readonly handler: RabbitMqHandler<T>;
  readonly options: ResolvedConsumerOptions;
  readonly policy: DecisionPolicy;
  readonly actions: DeliveryActions;
  /** Whether deliveries may run now; `paused` or `stopping` when not (they are requeued). */
  readonly admission: () => 'running' | 'paused' | 'stopping';
  /** The consumer's store gate: it pauses the consumer while closed. */
  readonly gate: StoreGate;
  readonly emit: Emit;
  readonly log: AdapterLog;
  readonly telemetry: MessageTelemetry<ConsumeMessage>;
  /** Aborts when the consumer stops. */
  readonly stopping: AbortSignal;
  /** Aborts when `stop()` gives up on the deliveries in flight: their handlers' signal aborts with it. */
  readonly abandoning: AbortSignal;
}

/**
 * RabbitMQ as the pipeline's port: reads a delivery's key (`messageId`, else the `idempotency-key`
 * header) and payload, and carries out each decision with the {@link DeliveryActions}: `ack`, a copy to a delay
 * tier or the dead-letter exchange, or `nack` with requeue. RabbitMQ has no delivery timer to extend.
 */
export class DeliveryPort<T> implements MessagePort<Incoming> {
  readonly #pipeline: MessagePipeline<Incoming, T>;
  /** The deliveries being processed, for {@link DeliveryPort.abandon}. */
  readonly #current = new Set<Incoming>();

  constructor(private readonly context: DeliveryPortContext<T>) {
    const { options, policy, idempotency, telemetry } = context;
    this.#pipeline = new MessagePipeline<Incoming, T>({
      idempotency,
      handler: context.handler as never,
      port: this,
      gate: context.gate,
      log: context.log,
      stopping: context.stopping,
      abandoning: context.abandoning,
      telemetry: {
        start: (incoming, scope) => {
          incoming.span = telemetry.start(incoming.message, scope);
          return incoming.span;
        },
      },
      options: {
        missingKey: options.missingKey,
        overrides: options.runOverrides,
        policy: { ...policy, isRetryable: policy.isRetryable ?? (() => true) },
      },
    });
  }

  /**
   * Processes one delivery; never rejects. A delivery that arrives while the consumer is paused or
   * stopping is requeued. A bug of this adapter requeues it after the shortest delay tier.
   */
  async process(message: ConsumeMessage, channel: ConsumeChannel): Promise<void> {
    const incoming: Incoming = { message, channel };
    this.#current.add(incoming);
    const { actions, telemetry, options } = this.context;
    try {
      const admission = this.context.admission();
      if (admission !== 'running') {
        incoming.span = telemetry.start(message, options.scope);
        actions.requeue(this.#delivery(incoming), admission);
        incoming.span.end();
        return;
      }
      const prepared = this.#pipeline.prepare(incoming);
      if (prepared.kind === 'keyed') incoming.key = prepared.request.key;
      await this.#pipeline.process(incoming, prepared);
    } catch (error) {
      // Never a handler error (the runner catches those): back after the shortest delay tier, not a hot loop.
      incoming.span ??= telemetry.start(message, options.scope);
      await actions.requeueLater(this.#delivery(incoming), 'internal-error');
      incoming.span.end(error);
    } finally {
      this.#current.delete(incoming);
    }
  }

  /**
   * `stop()` gave up on the deliveries in flight: each one not settled yet is reported `settled` with
   * `leave`/`abandoned`, and nothing more is sent for it. @returns how many were abandoned.
   */
  abandon(): number {
    let abandoned = 0;
    for (const incoming of this.#current) {
      if (this.context.actions.abandon(this.#delivery(incoming))) abandoned += 1;
    }
    return abandoned;
  }

  scopeOf(): string {
    return this.context.options.scope;
  }

  keyOf(incoming: Incoming): string | undefined {
    return this.context.options.idempotencyKey(incoming.message);
  }

  payloadOf(incoming: Incoming): Payload | undefined {
    return this.context.options.fingerprint(incoming.message);
  }

  handlerFields(incoming: Incoming): object {
    return { message: incoming.message };
  }

  subject(incoming: Incoming, fields: SubjectFields): MessageSubject {
    return { ...fields, source: this.#source(incoming) };
  }

  storeError(operation: string, error: unknown, incoming: Incoming | undefined): object {
    const source = incoming && this.#source(incoming);
    return { queue: this.context.options.queue, operation, error, source };
  }

  warningWords(): WarningWords {
    const { queue, deadLetterExchange } = this.context.options;
    return {
      where: `on queue ${queue}`,
      unacknowledged: 'the delivery is requeued',
      keySource: `by default the AMQP messageId property, else the ${IDEMPOTENCY_KEY_HEADER} header`,
      advice: ' Set messageId when publishing, or pass idempotencyKey.',
      deadLetter: (reason) => `dead-lettered (reason ${reason}) to ${deadLetterExchange}`,
    };
  }

  emit(name: string, payload: object): void {
    (this.context.emit as (name: string, payload: object) => void)(name, payload);
  }

  /**
   * A SHA-256 of the content and properties, without the headers RabbitMQ changes on each redelivery: a
   * requeued message comes back with the same. Two identical messages share it, which can only make one
   * be settled with the other's decision after a failed settle, never run twice more.
   */
  deliveryId(incoming: Incoming): string {
    const { message } = incoming;
    const hash = createHash('sha256').update(message.content);
    try {
      hash.update(JSON.stringify(withoutRedeliveryHeaders(message.properties)) ?? '');
    } catch {
      // Properties that cannot be serialized: the content alone identifies it.
    }
    return hash.digest('hex');
  }

  /** The attempt a delay-tier copy carries in its header. */
  priorRuns(incoming: Incoming): number {
    return attemptFromHeaders(incoming.message.properties.headers);
  }

  async carryOut(incoming: Incoming, end: MessageEnd<unknown>): Promise<CarriedOut<void>> {
    const { actions, idempotency, policy } = this.context;
    const delivery: Delivery = {
      ...this.#delivery(incoming),
      subject: this.subject(incoming, end.subject),
      span: end.span,
      markDeadLettered: end.markDeadLettered,
    };
    const decision = toRabbitMqDecision(end.decision, policy);
    let done = false;
    if (decision.action !== 'requeue') done = await actions.apply(delivery, decision);
    else if (decision.reason === 'store-unavailable' && idempotency.options.storeFailureMode === 'closed') {
      actions.requeue(delivery, decision.reason); // the consumer pauses until the store answers
    } else {
      // Consumption goes on: the delivery comes back after the shortest delay tier, not at once.
      await actions.requeueLater(delivery, decision.reason);
    }
    end.span.end();
    return { done, result: undefined };
  }

  #delivery(incoming: Incoming): Delivery {
    const subject = { scope: this.context.options.scope, key: incoming.key, outcome: undefined, attempt: 0 };
    return {
      message: incoming.message,
      channel: incoming.channel,
      subject: this.subject(incoming, subject),
      span: (incoming.span ??= this.context.telemetry.start(incoming.message, this.context.options.scope)),
    };
  }

  #source(incoming: Incoming): RabbitMqSource {
    const { fields } = incoming.message;
    const queue = this.context.options.queue;
    return { queue, deliveryTag: fields.deliveryTag, redelivered: fields.redelivered };
  }
}

/**
 * Headers RabbitMQ adds or changes on every redelivery: a quorum queue's `x-delivery-count` and
 * `x-acquired-count` (RabbitMQ 4). A requeued message comes back with them, so they do not identify it.
 */
const REDELIVERY_HEADERS = ['x-delivery-count', 'x-acquired-count'] as const;

/** `properties` without {@link REDELIVERY_HEADERS} (the same object when it has none). */
function withoutRedeliveryHeaders(properties: ConsumeMessage['properties']): ConsumeMessage['properties'] {
  const headers = properties.headers as Record<string, unknown> | undefined;
  if (!headers || !REDELIVERY_HEADERS.some((name) => name in headers)) return properties;
  const kept = { ...headers };
  for (const name of REDELIVERY_HEADERS) delete kept[name];
  return { ...properties, headers: kept };
}
