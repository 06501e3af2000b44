import {
  describeError,
  type Idempotency,
  type IdempotencyLogger,
  isIdempotencyError,
  type RunOptions,
  type RunResult,
} from '@idempotent-consumer/core';
import { extendHandlerContext } from '@idempotent-consumer/core/kit';
import type { ConsumeMessage } from 'amqplib';
import type { ConsumeChannel } from './amqp-types';
import { type DecisionPolicy, decide } from './decide';
import type { DeliverySubject, Emit } from './events';
import type { RabbitMqHandler } from './handler';
import { attemptFromHeaders, IDEMPOTENCY_KEY_HEADER } from './headers';
import { KeyPolicy } from './key-policy';
import type { ResolvedConsumerOptions } from './options';
import type { Delivery, Settler } from './settler';

/** What a {@link DeliveryProcessor} works with. */
export interface DeliveryProcessorContext<T> {
  readonly idempotency: Idempotency;
  readonly handler: RabbitMqHandler<T>;
  readonly options: ResolvedConsumerOptions;
  readonly keyPolicy: KeyPolicy;
  readonly policy: DecisionPolicy;
  readonly runOptions: RunOptions;
  readonly settler: Settler;
  /** Whether deliveries may run now; `paused` or `stopping` when not (they are requeued). */
  readonly admission: () => 'running' | 'paused' | 'stopping';
  /** Called with the error of a claim the store did not answer: the consumer pauses (fail closed). */
  readonly storeUnavailable: (error: unknown) => void;
  readonly emit: Emit;
  /** Where the first delivery without a key is reported, `false` for nowhere. */
  readonly logger: IdempotencyLogger | false;
}

/**
 * Handles one delivery from its arrival to its decision: reads the key (`missingKey` for a delivery
 * without one), runs the handler through the runner (claim, heartbeat, outcome write), decides
 * ({@link decide}) and hands the decision to the {@link Settler}. A store that does not answer the claim
 * requeues the delivery and pauses the consumer: nothing is acked that did not complete.
 */
export class DeliveryProcessor<T> {
  constructor(private readonly context: DeliveryProcessorContext<T>) {}

  /** Processes one delivery; never rejects (an adapter bug requeues the delivery). */
  async process(message: ConsumeMessage, channel: ConsumeChannel): Promise<void> {
    const delivery = { message, channel, subject: this.#subject(message, undefined) };
    try {
      await this.#process(delivery);
    } catch {
      // A bug in this adapter, never a handler error (the runner catches those): give the message back.
      this.context.settler.requeue(delivery, 'internal-error');
    }
  }

  async #process(delivery: Delivery): Promise<void> {
    const { settler, keyPolicy } = this.context;
    const admission = this.context.admission();
    if (admission !== 'running') {
      settler.requeue(delivery, admission);
      return;
    }
    const reading = keyPolicy.read(delivery.message);
    if (reading.kind === 'invalid') {
      await settler.apply(delivery, reading.decision);
      return;
    }
    if (reading.kind === 'missing') {
      this.context.emit('missingKey', { ...delivery.subject, action: keyPolicy.missingKey });
      if (keyPolicy.firstMissing()) this.#warnMissingKey(delivery);
      if (keyPolicy.missingKey === 'dead-letter') {
        await settler.apply(delivery, KeyPolicy.MISSING_KEY_DEAD_LETTER);
      } else {
        await this.#runUnprotected(delivery);
      }
      return;
    }
    const keyed = { ...delivery, subject: this.#subject(delivery.message, reading.key) };
    const result = await this.#run(keyed, reading.key);
    if (result) await this.#decide(keyed, result);
  }

  /** Runs the handler through the runner; `undefined` when the delivery was settled without a result. */
  async #run(delivery: Delivery, key: string): Promise<RunResult<T> | undefined> {
    const { idempotency, options, handler, runOptions, settler } = this.context;
    const { message } = delivery;
    try {
      const payload = options.fingerprint(message);
      return await idempotency.run<T>(
        { scope: options.scope, key, ...(payload === undefined ? {} : { payload }) },
        (context) => handler(extendHandlerContext(context, { message })),
        runOptions,
      );
    } catch (error) {
      if (isIdempotencyError(error) && error.code === 'INVALID_IDEMPOTENCY_KEY') {
        await settler.apply(delivery, {
          action: 'dead-letter',
          reason: 'invalid-key',
          attempt: 0,
          error: describeError(error),
        });
        return undefined;
      }
      // StoreUnavailableError (or a reply this version cannot read): fail closed, ack nothing.
      this.context.storeUnavailable(error);
      settler.requeue(delivery, 'store-unavailable');
      return undefined;
    }
  }

  async #decide(delivery: Delivery, result: RunResult<T>): Promise<void> {
    const unprotectedAttempt = attemptFromHeaders(delivery.message.properties.headers) + 1;
    const decision = decide(result, this.context.policy, unprotectedAttempt);
    const attempt = result.outcome === 'UNPROTECTED' ? unprotectedAttempt : result.attempt;
    const subject = { ...delivery.subject, outcome: result.outcome, attempt };
    if ('status' in result && result.status === 'lease-lost') {
      this.context.emit('leaseLost', {
        ...subject,
        during: !result.handlerStarted ? 'start' : result.handlerCompleted ? 'write' : 'heartbeat',
        handlerCompleted: result.handlerCompleted,
      });
    }
    await this.context.settler.apply({ ...delivery, subject }, decision);
  }

  /**
   * `missingKey: 'process'`: runs the handler without a claim (`key` `''`, `fencingToken` 0, outcome
   * `UNPROTECTED`); attempts are counted in a header and bounded by `maxAttempts`.
   */
  async #runUnprotected(delivery: Delivery): Promise<void> {
    const { message } = delivery;
    const attempt = attemptFromHeaders(message.properties.headers) + 1;
    let result: RunResult<T>;
    try {
      const value = await this.context.handler({
        message,
        scope: this.context.options.scope,
        key: '',
        fencingToken: 0,
        attempt,
        outcome: 'UNPROTECTED',
        signal: new AbortController().signal,
      });
      result = { outcome: 'UNPROTECTED', status: 'completed', result: value, storeError: undefined };
    } catch (error) {
      result = { outcome: 'UNPROTECTED', status: 'threw', error, storeError: undefined };
    }
    await this.#decide(delivery, result);
  }

  /**
   * Once per consumer: a producer that forgets the key (amqplib sets no `messageId` by itself) would
   * otherwise see every message dead-lettered, or run unprotected, without a line in the log.
   */
  #warnMissingKey(delivery: Delivery): void {
    const { logger, options, keyPolicy } = this.context;
    if (!logger) return;
    const what =
      keyPolicy.missingKey === 'dead-letter'
        ? `dead-lettered (reason missing-key) to ${options.deadLetterExchange}`
        : 'processed without idempotency (outcome UNPROTECTED)';
    try {
      logger.warn(
        `idempotent-consumer: a message on queue ${options.queue} has no idempotency key (by default the AMQP messageId property, else the ${IDEMPOTENCY_KEY_HEADER} header); it is ${what}. Set messageId when publishing, or pass idempotencyKey. Further messages without a key are reported only by the missingKey event.`,
        {
          queue: options.queue,
          scope: options.scope,
          missingKey: keyPolicy.missingKey,
          deliveryTag: delivery.message.fields.deliveryTag,
        },
      );
    } catch {
      // A logger that throws changes nothing.
    }
  }

  #subject(message: ConsumeMessage, key: string | undefined): DeliverySubject {
    return {
      scope: this.context.options.scope,
      key,
      outcome: undefined,
      attempt: 0,
      source: {
        queue: this.context.options.queue,
        deliveryTag: message.fields.deliveryTag,
        redelivered: message.fields.redelivered,
      },
    };
  }
}
