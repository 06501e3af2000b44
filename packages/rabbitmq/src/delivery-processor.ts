import { createHash } from 'node:crypto';
import {
  type Idempotency,
  type IdempotencyError,
  InvalidPayloadError,
  isIdempotencyError,
  type Payload,
  type RunOptions,
  type RunResult,
  StoreUnavailableError,
} from '@idempotent-consumer/core';
import {
  type AdapterLog,
  callUnprotected,
  extendHandlerContext,
  giveBackUnrun,
  type HeaderCarrier,
  leaseLostDuring,
  type MessageTelemetry,
  recordCompletionLate,
  runUnprotected,
  type StoreGate,
  UnprotectedRuns,
  unreadableDuplicateOf,
  writtenClaimOf,
} from '@idempotent-consumer/core/kit';
import type { ConsumeMessage } from 'amqplib';
import type { ConsumeChannel } from './amqp-types';
import { type Decision, type DecisionPolicy, decide } from './decide';
import type { Emit, MessageSubject } from './events';
import type { RabbitMqHandler, RabbitMqHandlerContext } from './handler';
import { HandlerSignal } from './handler-signal';
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
  /**
   * Aborts when `stop()` abandons the deliveries still in flight (`stopTimeoutMs` ran out): the `signal`
   * of their handlers aborts with it ({@link HandlerSignal}).
   */
  readonly abandoning: AbortSignal;
  readonly settler: Settler;
  /** Whether deliveries may run now; `paused` or `stopping` when not (they are requeued). */
  readonly admission: () => 'running' | 'paused' | 'stopping';
  /**
   * Called with the `StoreUnavailableError` of a claim: the consumer pauses (fail closed). Not called
   * under the runner's `storeFailureMode: 'open'` (such a delivery is requeued later, consumption goes on).
   */
  readonly storeUnavailable: (error: unknown) => void;
  /**
   * The consumer's store gate: a claim a failed `run` had written and could not give back
   * (`StoreUnavailableError.writtenClaim`) is given back each time it opens, until the store answers or
   * the consumer stops (the kit's `giveBackUnrun`).
   */
  readonly storeGate?: StoreGate;
  readonly emit: Emit;
  /** Where the first delivery without a key (or with an invalid one) is reported. */
  readonly log: AdapterLog;
  /** A span per delivery and the metrics (no-ops without OpenTelemetry). */
  readonly telemetry: MessageTelemetry<ConsumeMessage, HeaderCarrier>;
}

/** The decision of an unprotected run that ended with nothing left to run: the ack, or a dead letter. */
type HeldDecision = Extract<Decision, { action: 'ack' | 'dead-letter' }>;

/**
 * Handles one delivery from its arrival to its decision: reads the key (`missingKey` for a delivery
 * without one), runs the handler through the runner (claim, heartbeat, outcome write), decides
 * ({@link decide}) and hands the decision to the {@link Settler}. A store that does not answer the claim
 * (`StoreUnavailableError`) requeues the delivery and pauses the consumer: nothing is acked that did not
 * complete. A key the store refuses, or a payload that cannot be fingerprinted, is dead-lettered as
 * `invalid-key`; a DUPLICATE whose stored result cannot be decoded (`UnreadableResultError`) is acked as a
 * duplicate (with a `storeError` event); any other store error requeues the delivery after the shortest
 * delay tier.
 */
export class DeliveryProcessor<T> {
  /** Unprotected runs whose decision could not be carried out, by message digest (see `#unprotectedId`). */
  readonly #unprotectedRuns = new UnprotectedRuns<HeldDecision>();
  /** The deliveries being processed, with what is known of them (the key once read), for {@link abandon}. */
  readonly #current = new Map<ConsumeMessage, Delivery>();

  constructor(private readonly context: DeliveryProcessorContext<T>) {}

  /**
   * Processes one delivery; never rejects (an adapter bug requeues the delivery after the shortest delay
   * tier, or at once when the consumer stops meanwhile).
   */
  async process(message: ConsumeMessage, channel: ConsumeChannel): Promise<void> {
    const span = this.context.telemetry.start(message, this.context.options.scope);
    const delivery = { message, channel, subject: this.#subject(message, undefined), span };
    this.#current.set(message, delivery);
    try {
      await span.run(() => this.#process(delivery));
      span.end();
    } catch (error) {
      // A bug in this adapter, never a handler error (the runner catches those): give the message back
      // after the shortest delay tier (a deterministic bug must not become a hot redelivery loop).
      await this.context.settler.requeueLater(delivery, 'internal-error');
      span.end(error);
    } finally {
      this.#current.delete(message);
    }
  }

  /**
   * `stop()` gave up on the deliveries in flight (`stopTimeoutMs` ran out): each one not settled yet is
   * reported `settled` with `leave`/`abandoned` ({@link Settler.abandon}; `key` as read, `outcome`
   * `undefined`, `attempt` 0, as the SQS poller reports its abandoned messages). Call it once the
   * settler's `abandoned()` is true, so nothing else is settled or reported for them afterwards.
   * @returns how many were abandoned.
   */
  abandon(): number {
    let abandoned = 0;
    for (const delivery of this.#current.values()) {
      const subject = { ...delivery.subject, outcome: undefined, attempt: 0 };
      if (this.context.settler.abandon({ ...delivery, subject })) abandoned += 1;
    }
    return abandoned;
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
      await this.#invalidKey(delivery, reading.error);
      return;
    }
    if (reading.kind === 'missing') {
      this.context.emit('missingKey', { ...delivery.subject, action: keyPolicy.missingKey });
      this.#warnMissingKey(delivery);
      if (keyPolicy.missingKey === 'dead-letter') {
        await settler.apply(delivery, KeyPolicy.MISSING_KEY_DEAD_LETTER);
      } else {
        await this.#runUnprotected(delivery);
      }
      return;
    }
    const keyed = { ...delivery, subject: this.#subject(delivery.message, reading.key) };
    this.#current.set(delivery.message, keyed);
    if (await this.#settleHeld(keyed)) return;
    const result = await this.#run(keyed, reading.key);
    if (!result) return;
    if (result.outcome === 'UNPROTECTED') await this.#settleUnprotected(keyed, result);
    else await this.#decide(keyed, result);
  }

  /** Runs the handler through the runner; `undefined` when the delivery was settled without a result. */
  async #run(delivery: Delivery, key: string): Promise<RunResult<T> | undefined> {
    const { idempotency, options, handler, runOptions, settler } = this.context;
    const { message } = delivery;
    let payload: Payload | undefined;
    try {
      payload = options.fingerprint(message);
    } catch (error) {
      await this.#invalidKey(
        delivery,
        new InvalidPayloadError(`The fingerprint function threw: ${describe(error)}`, { cause: error }),
      );
      return undefined;
    }
    // The handler's signal follows the runner's, and aborts too when stop() abandons the delivery.
    const signal = new HandlerSignal(this.context.abandoning);
    try {
      return await idempotency.run<T>(
        { scope: options.scope, key, ...(payload === undefined ? {} : { payload }) },
        (context) =>
          delivery.span.timeHandler(() =>
            context.outcome === 'UNPROTECTED'
              ? // Failing open, the runner's signal never aborts and no handlerTimeoutMs applies: bound the
                // run as one without a key is (stop(), handlerTimeoutMs), as the Kafka and SQS adapters do.
                callUnprotected(
                  (bounded) => handler(extendHandlerContext(context, { message }, { signal: bounded })),
                  runOptions.signal,
                  runOptions.handlerTimeoutMs ?? idempotency.options.handlerTimeoutMs,
                  context,
                )
              : handler(extendHandlerContext(context, { message }, signal.following(context))),
          ),
        runOptions,
      );
    } catch (error) {
      if (isIdempotencyError(error)) {
        if (error.code === 'INVALID_IDEMPOTENCY_KEY' || error.code === 'INVALID_PAYLOAD') {
          await this.#invalidKey(delivery, error as IdempotencyError);
          return undefined;
        }
        if (error.code === 'STORE_UNAVAILABLE') {
          if (idempotency.options.storeFailureMode === 'open') {
            // Failing open, a claim the store did not answer runs unprotected: this is the runner's one
            // extension before the handler, or a conflict wait whose own claim went unanswered after Redis
            // applied it (nothing ran in either). Consumption goes on; a claim the error still names is
            // given back (one try: the gate stays open), and the delivery comes back after the shortest
            // delay tier, to run unprotected if the store is still down.
            this.#giveBackWritten(delivery, key, error);
            await settler.requeueLater(delivery, 'store-unavailable');
            return undefined;
          }
          // Fail closed: ack nothing, pause until the store answers.
          this.context.storeUnavailable(error);
          this.#giveBackWritten(delivery, key, error);
          settler.requeue(delivery, 'store-unavailable');
          return undefined;
        }
      }
      // Not an outage (a reply this version cannot read, a bug): reported, no pause. A DUPLICATE whose
      // stored result this version cannot decode (a newer version's, or corrupt) is reported as the Kafka
      // and SQS adapters do (`settle`): the operation completed, and a consumer never needs the result,
      // so it is acked as any DUPLICATE.
      const duplicate = unreadableDuplicateOf(error, this.context.log);
      this.context.emit('storeError', {
        queue: options.queue,
        operation: duplicate ? 'settle' : 'run',
        error,
        source: delivery.subject.source,
      });
      if (duplicate) return duplicate;
      // Anything else comes back after the shortest delay tier.
      await settler.requeueLater(delivery, 'store-error');
      return undefined;
    } finally {
      signal.dispose();
    }
  }

  /**
   * Gives back a claim the failed `run` had written, whose give-back inside the runner went unanswered
   * too (`StoreUnavailableError.writtenClaim`): no handler ran under it. Tried once the store gate (closed
   * by the pause) opens, and again each time it opens until the store answers or the consumer stops (the
   * kit's `giveBackUnrun`; a failed try is a `storeError` event, `operation` `release`). The consumer
   * resumes only once the gate opens, so the requeued delivery's claim comes after the give-back was sent:
   * left alone, the claim held the key IN_PROGRESS until its lease lapsed, and each redelivery met it as a
   * CONFLICT. Under the runner's `storeFailureMode: 'open'` the gate stays open: one try, at once (an
   * unanswered one lapses with the claim's lease), as in the Kafka and SQS adapters.
   */
  #giveBackWritten(delivery: Delivery, key: string, error: unknown): void {
    const { idempotency, options, storeGate, runOptions } = this.context;
    void giveBackUnrun(idempotency, { scope: options.scope, key }, writtenClaimOf(error), {
      gate: storeGate,
      signal: runOptions.signal,
      onStoreError: (releaseError) =>
        this.context.emit('storeError', {
          queue: options.queue,
          operation: 'release',
          error: releaseError,
          source: delivery.subject.source,
        }),
    });
  }

  /**
   * A key the extractor or the store refused, or a payload that cannot be fingerprinted: the delivery
   * would fail the same way on every redelivery, so it is dead-lettered as `invalid-key` (whatever
   * `missingKey` says), with an `invalidKey` event carrying the typed error.
   */
  async #invalidKey(delivery: Delivery, error: IdempotencyError): Promise<void> {
    this.context.emit('invalidKey', { ...delivery.subject, error });
    const { options, log } = this.context;
    log.warnOnce(
      'invalid-key',
      `a message on queue ${options.queue} has an invalid idempotency key or payload (${describe(error)}); it is dead-lettered (reason invalid-key) to ${options.deadLetterExchange}. Further ones are reported only by the invalidKey event.`,
      { deliveryTag: delivery.message.fields.deliveryTag, error },
    );
    await this.context.settler.apply(delivery, KeyPolicy.invalidKeyDeadLetter(error));
  }

  async #decide(
    delivery: Delivery,
    result: Exclude<RunResult<T>, { outcome: 'UNPROTECTED' }>,
  ): Promise<void> {
    const decision = decide(result, this.context.policy);
    const subject = { ...delivery.subject, outcome: result.outcome, attempt: result.attempt };
    if ('status' in result && result.status === 'completed' && !result.recorded) {
      this.#recordCompletionLate({ ...delivery, subject }, result);
    }
    delivery.span.result(result, subject.key);
    if ('status' in result && result.status === 'lease-lost') {
      this.context.emit('leaseLost', {
        ...subject,
        during: leaseLostDuring(result),
        handlerCompleted: result.handlerCompleted,
      });
    }
    await this.context.settler.apply({ ...delivery, subject }, decision);
  }

  /**
   * A handler that completed whose COMPLETED write the store did not take (`recorded: false`: it did not
   * answer through the runner's `writeAttempts`). The delivery is still acked (its handler completed).
   * Under the runner's `storeFailureMode: 'closed'` the consumer pauses first, as for a claim the store
   * does not answer (`storeUnavailable`, then `storeRecovered` once a probe answers). The write is handed
   * to the kit's `recordCompletionLate` with the store gate and the stop signal: tried each time the gate
   * opens (before consumption resumes) until the store takes it (a redelivery of the key is then a
   * `DUPLICATE`, not an `ACQUIRED_STALE` run once the lease lapsed) or refuses it (`LEASE_LOST`), or
   * `stop()`; the record then lapses with its lease. Failing open, it is tried once, now. Each failed try
   * is a `storeError` event (`complete`). Not awaited.
   */
  #recordCompletionLate(delivery: Delivery, run: RunResult<T>): void {
    const { idempotency, options, storeGate, runOptions } = this.context;
    const { key, attempt } = delivery.subject;
    if (key === undefined) return; // a run through the runner always has one
    if (idempotency.options.storeFailureMode === 'closed') {
      this.context.storeUnavailable(
        new StoreUnavailableError(
          `the store did not take the COMPLETED write of a handler that completed (key ${key}, attempt ${attempt}); it is written once the store answers`,
        ),
      );
    }
    void recordCompletionLate(idempotency, { scope: options.scope, key }, run, {
      gate: storeGate,
      signal: runOptions.signal,
      onStoreError: (error) =>
        this.context.emit('storeError', {
          queue: options.queue,
          operation: 'complete',
          error,
          source: delivery.subject.source,
        }),
    });
  }

  /**
   * `missingKey: 'process'`: runs the handler without a claim (`key` `undefined`, `fencingToken` 0,
   * outcome `UNPROTECTED`); attempts are counted in a header and bounded by `maxAttempts`.
   */
  async #runUnprotected(delivery: Delivery): Promise<void> {
    if (await this.#settleHeld(delivery)) return;
    const { message } = delivery;
    const id = this.#unprotectedId(message);
    const attempt = this.#unprotectedRuns.attemptOf(id, attemptFromHeaders(message.properties.headers));
    if (attempt > this.context.policy.maxAttempts) {
      // Its runs were counted, but the decision after the last one was not carried out: do not run again.
      await this.#settleUnprotected(delivery, undefined);
      return;
    }
    // The signal aborts when the consumer stops (`runOptions.signal`) or `handlerTimeoutMs` passes.
    const { runOptions, idempotency } = this.context;
    const result = await runUnprotected<T, RabbitMqHandlerContext>(
      (context) => delivery.span.timeHandler(() => this.context.handler(context)),
      {
        message,
        scope: this.context.options.scope,
        key: undefined,
        fencingToken: 0,
        attempt,
        outcome: 'UNPROTECTED',
      },
      runOptions.signal,
      { handlerTimeoutMs: runOptions.handlerTimeoutMs ?? idempotency.options.handlerTimeoutMs },
    );
    await this.#settleUnprotected(delivery, result);
  }

  /**
   * Decides and settles an unprotected run (`result`; `undefined`: its attempts are exhausted and it was
   * not run again). When the decision cannot be carried out (a republish failed, the channel closed), the
   * run is remembered: a redelivery counts it into its attempt, and a decision that ends the message (ack
   * of a completed run, dead letter) is carried out again without running the handler. The run goes to the
   * span with the delivery's key, which a run failing open (`storeFailureMode: 'open'`) has.
   */
  async #settleUnprotected(delivery: Delivery, result: RunResult<T> | undefined): Promise<void> {
    const { message } = delivery;
    const id = this.#unprotectedId(message);
    const attempt = this.#unprotectedRuns.attemptOf(id, attemptFromHeaders(message.properties.headers));
    const decision: Decision = result
      ? decide(result, this.context.policy, attempt)
      : {
          action: 'dead-letter',
          reason: 'attempts-exhausted',
          attempt: attempt - 1,
          error: `The handler ran ${attempt - 1} times without protection (maxAttempts ${this.context.policy.maxAttempts}) and its last outcome could not be settled`,
          failedFencingToken: undefined,
        };
    const subject = { ...delivery.subject, outcome: 'UNPROTECTED' as const, attempt };
    // A run failing open has its key (`undefined` only without one): `idempotency.key` as elsewhere.
    if (result) delivery.span.result(result, subject.key);
    if (await this.context.settler.apply({ ...delivery, subject }, decision)) {
      this.#unprotectedRuns.forget(id);
      return;
    }
    if (result) this.#unprotectedRuns.ran(id);
    if (decision.action === 'ack' || decision.action === 'dead-letter')
      this.#unprotectedRuns.hold(id, decision);
  }

  /**
   * A redelivery of an unprotected run whose ending decision was held: carries it out again, without
   * running anything. @returns whether the delivery was such a redelivery.
   */
  async #settleHeld(delivery: Delivery): Promise<boolean> {
    const { message } = delivery;
    if (!message.fields.redelivered || this.#unprotectedRuns.size === 0) return false;
    const id = this.#unprotectedId(message);
    const held = this.#unprotectedRuns.get(id)?.held;
    if (!held) return false;
    const subject = {
      ...delivery.subject,
      outcome: 'UNPROTECTED' as const,
      attempt: held.action === 'dead-letter' ? held.attempt : 0,
    };
    if (await this.context.settler.apply({ ...delivery, subject }, held)) this.#unprotectedRuns.forget(id);
    return true;
  }

  /**
   * What identifies a delivery of one message across requeues (nack with requeue redelivers the same
   * content and properties): a SHA-256 digest of both, without the headers the broker itself changes on
   * each redelivery ({@link REDELIVERY_HEADERS}: a quorum queue's `x-delivery-count`). Two identical
   * messages share it, which can only make one of them be settled with the other's decision after a
   * failed settle: never run twice more.
   */
  #unprotectedId(message: ConsumeMessage): string {
    const hash = createHash('sha256').update(message.content);
    try {
      hash.update(JSON.stringify(withoutRedeliveryHeaders(message.properties)) ?? '');
    } catch {
      // Properties that cannot be serialized: the content alone identifies it.
    }
    return hash.digest('hex');
  }

  /**
   * Once per consumer: a producer that forgets the key (amqplib sets no `messageId` by itself) would
   * otherwise see every message dead-lettered, or run unprotected, without a line in the log.
   */
  #warnMissingKey(delivery: Delivery): void {
    const { log, options, keyPolicy } = this.context;
    const what =
      keyPolicy.missingKey === 'dead-letter'
        ? `dead-lettered (reason missing-key) to ${options.deadLetterExchange}`
        : 'processed without idempotency (outcome UNPROTECTED)';
    log.warnOnce(
      'missing-key',
      `a message on queue ${options.queue} has no idempotency key (by default the AMQP messageId property, else the ${IDEMPOTENCY_KEY_HEADER} header); it is ${what}. Set messageId when publishing, or pass idempotencyKey. Further messages without a key are reported only by the missingKey event.`,
      {
        scope: options.scope,
        missingKey: keyPolicy.missingKey,
        deliveryTag: delivery.message.fields.deliveryTag,
      },
    );
  }

  #subject(message: ConsumeMessage, key: string | undefined): MessageSubject {
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

/**
 * Headers RabbitMQ adds or changes on every redelivery of a message: a quorum queue's `x-delivery-count`
 * (1, 2, … on each redelivery, RabbitMQ 3.8 and later) and `x-acquired-count` (RabbitMQ 4). A requeued
 * message comes back with them, so they are no part of what identifies it.
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

function describe(error: unknown): string {
  return error instanceof Error ? `${error.name}: ${error.message}` : String(error);
}
