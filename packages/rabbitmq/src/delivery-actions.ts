import { type MessageSpan, StopSignal } from '@idempotent-consumer/core/kit';
import type { ConsumeMessage } from 'amqplib';
import type { ConsumeChannel } from './amqp-types';
import type { ConfirmPublisher } from './confirm-publisher';
import type { Decision, RequeueReason } from './decide';
import type { DeliveryAcks } from './delivery-acks';
import type { Emit, MessageSubject } from './events';
import { deadLetterHeaders, republishOptions, retryHeaders } from './republish-headers';
import type { ConsumerTopology } from './topology';

/** One delivery being settled: the message, the channel it came on, and what events say about it. */
export interface Delivery {
  readonly message: ConsumeMessage;
  /** The channel it was delivered on: its delivery tag means something only there. */
  readonly channel: ConsumeChannel;
  readonly subject: MessageSubject;
  /** Its telemetry (a no-op without OpenTelemetry): the decision carried out is reported to it. */
  readonly span: MessageSpan;
  /** Marks its FAILED record dead-lettered once the copy is confirmed. Never rejects. */
  readonly markDeadLettered?: () => Promise<void>;
}

/** What a {@link DeliveryActions} works with. */
export interface DeliveryActionsContext {
  readonly topology: ConsumerTopology;
  /** The confirm publisher (reopened when it closed). */
  readonly publisher: () => Promise<ConfirmPublisher>;
  /** The acks of `channel` while it is still the consumer's open consume channel, else `undefined`. */
  readonly acks: (channel: ConsumeChannel) => DeliveryAcks | undefined;
  /** How long a delivery whose republish failed waits before it is requeued, in milliseconds. */
  readonly requeueAfterMs: number;
  /** Ends that wait early (the consumer stops). */
  readonly signal: AbortSignal;
  /**
   * Whether `stop()` abandoned the deliveries still in flight (`stopTimeoutMs` ran out): nothing more is
   * published, acked or nacked for them, nor reported (beyond {@link DeliveryActions.abandon}'s `settled`); the
   * broker requeues them when the channel closes.
   */
  readonly abandoned: () => boolean;
  readonly emit: Emit;
}

/**
 * Carries out a {@link Decision} on the broker (docs/design.md#outcome-to-broker-action, RabbitMQ column):
 * `ack`; `retry` and `dead-letter` as a copy published on the confirm channel (mandatory, so an
 * unroutable copy is refused), the original acked only once the broker confirmed the copy; `requeue` as
 * `nack` with requeue. Each delivery is settled at most once, on the channel it came on. Once `stop()`
 * abandoned the deliveries in flight, it carries out nothing more: no copy, no ack or nack, no event (each
 * was reported once by {@link DeliveryActions.abandon}), not even for a copy whose confirm arrives then (the
 * original stays unacked and comes back; its record decides).
 */
export class DeliveryActions {
  readonly #settled = new WeakSet<ConsumeMessage>();

  constructor(private readonly context: DeliveryActionsContext) {}

  /**
   * Carries out `decision`; never rejects.
   * @returns true when the delivery was settled as decided; false when it was not (a republish failed
   *   and the delivery was requeued, or its channel closed): the broker delivers it again.
   */
  async apply(delivery: Delivery, decision: Decision): Promise<boolean> {
    switch (decision.action) {
      case 'ack':
        if (!this.#settle(delivery, 'ack')) return false;
        this.#report(delivery, decision);
        return true;
      case 'requeue':
        this.requeue(delivery, decision.reason);
        return false;
      case 'leave':
        return false; // nothing to send: only `abandon` reports it
      case 'retry': {
        const tier = this.context.topology.delayTiers.find((t) => t.delayMs === decision.delayMs)!;
        const headers = retryHeaders(delivery.message, delivery.subject, decision);
        if (!(await this.#republish(delivery, '', tier.queue, headers, decision.delayMs))) return false;
        if (this.context.abandoned()) return false; // confirmed after stop() gave up: nothing more
        // Reported once confirmed, even when the ack below fails (its channel closed): the copy is there.
        this.context.emit('retryScheduled', {
          ...delivery.subject,
          reason: decision.reason,
          delayMs: decision.delayMs,
          wantedDelayMs: decision.wantedDelayMs,
          delayQueue: tier.queue,
          error: decision.error,
        });
        if (!this.#settle(delivery, 'ack')) return false;
        this.#report(delivery, decision);
        return true;
      }
      case 'dead-letter': {
        const { deadLetterExchange: exchange, deadLetterRoutingKey: routingKey } = this.context.topology;
        const headers = deadLetterHeaders(delivery.message, delivery.subject, decision);
        const shortestTierMs = this.context.topology.delayTiers[0]!.delayMs;
        if (!(await this.#republish(delivery, exchange, routingKey, headers, shortestTierMs))) return false;
        // The copy is confirmed: a redelivery of this FAILED record is acked without another copy. Also
        // when stop() gave up on the delivery meanwhile: unmarked, the redelivery would send a second copy.
        await delivery.markDeadLettered?.();
        // Confirmed after stop() gave up: nothing more reaches the broker, and no event is emitted.
        if (this.context.abandoned()) return false;
        // Reported once confirmed, even when the ack below fails (its channel closed): the copy is there, and
        // a FAILED record's redelivery is acked without another one.
        this.context.emit('deadLettered', {
          ...delivery.subject,
          reason: decision.reason,
          error: decision.error,
          destination: { exchange, routingKey },
        });
        if (!this.#settle(delivery, 'ack')) return false;
        this.#report(delivery, decision);
        return true;
      }
    }
  }

  /**
   * `nack` with requeue after `requeueAfterMs` (the shortest delay tier; at once when the consumer
   * stops): for a delivery that cannot be decided now but must not pause the consumer, so it does not
   * come straight back.
   */
  async requeueLater(delivery: Delivery, reason: RequeueReason): Promise<void> {
    await StopSignal.sleep(this.context.requeueAfterMs, this.context.signal);
    this.requeue(delivery, reason);
  }

  /**
   * Reports a delivery `stop()` abandoned (`stopTimeoutMs` ran out) unless it was settled already: one
   * `settled` event with `{ action: 'leave', reason: 'abandoned' }` (as the SQS poller's) and the `leave`
   * broker action to its telemetry. Nothing is sent to the broker (it stays unacked and is redelivered once
   * its channel closes), and nothing more is settled or reported for it afterwards.
   * @returns whether it was abandoned now (false: it was settled, or abandoned, before).
   */
  abandon(delivery: Delivery): boolean {
    if (this.#settled.has(delivery.message)) return false;
    this.#settled.add(delivery.message);
    this.#report(delivery, { action: 'leave', reason: 'abandoned' });
    return true;
  }

  /** `nack` with requeue; the broker delivers the message again. */
  requeue(delivery: Delivery, reason: RequeueReason): void {
    if (this.#settle(delivery, 'nack')) this.#report(delivery, { action: 'requeue', reason });
  }

  /** Reports a delivery settled for good: the `settled` event, and the decision to its telemetry. */
  #report(delivery: Delivery, decision: Decision): void {
    delivery.span.brokerAction(decision.action);
    this.context.emit('settled', { ...delivery.subject, decision });
  }

  /**
   * Publishes a copy and waits for the broker's confirm. On failure the delivery is requeued after
   * `requeueAfterMs` (never an immediate requeue loop), and false is returned. A delivery whose channel
   * closed is not copied: the broker has requeued it already.
   */
  async #republish(
    delivery: Delivery,
    exchange: string,
    routingKey: string,
    headers: Record<string, unknown>,
    requeueAfterMs: number,
  ): Promise<boolean> {
    if (this.context.abandoned()) return false;
    if (this.context.acks(delivery.channel) === undefined) {
      this.#settle(delivery, 'ack'); // reports the closed channel as a brokerError
      return false;
    }
    const { message } = delivery;
    try {
      const publisher = await this.context.publisher();
      await publisher.publish(exchange, routingKey, message.content, republishOptions(message, headers));
      return true;
    } catch (error) {
      // The confirm channel closed at stop() after it gave up on this delivery: nothing to report.
      if (this.context.abandoned()) return false;
      this.context.emit('brokerError', {
        queue: delivery.subject.source.queue,
        operation: 'publish',
        error,
        source: delivery.subject.source,
      });
      await StopSignal.sleep(requeueAfterMs, this.context.signal);
      this.requeue(delivery, 'publish-failed');
      return false;
    }
  }

  /**
   * Acks or nacks (with requeue) a delivery at most once (a second settle of one delivery tag is a
   * channel error in AMQP 0-9-1), on the channel it came on; acks go out at the end of the turn, several
   * in one frame when they can ({@link DeliveryAcks}). False (and `brokerError`) when that channel is
   * closed or refused it: the broker redelivers the message. False (and nothing sent) once `stop()`
   * abandoned the deliveries in flight.
   */
  #settle(delivery: Delivery, operation: 'ack' | 'nack'): boolean {
    const { message, channel, subject } = delivery;
    if (this.#settled.has(message) || this.context.abandoned()) return false;
    this.#settled.add(message);
    try {
      const acks = this.context.acks(channel);
      if (acks === undefined) {
        throw new Error('The consume channel closed; the broker redelivers the message');
      }
      if (operation === 'ack') acks.ack(message);
      else acks.nack(message);
      return true;
    } catch (error) {
      this.context.emit('brokerError', {
        queue: subject.source.queue,
        operation,
        error,
        source: subject.source,
      });
      return false;
    }
  }
}
