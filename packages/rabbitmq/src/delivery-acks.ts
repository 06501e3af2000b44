import type { ConsumeMessage } from 'amqplib';
import type { ConsumeChannel } from './amqp-types';
import { SettledTags } from './settled-tags';

/**
 * Acks the deliveries of one consume channel in as few `basic.ack` frames as AMQP 0-9-1 allows. The acks
 * asked for within one turn of the event loop (a prefetch window's handlers often return together) are
 * sent at the end of that turn (`process.nextTick`): the longest run of settled delivery tags from the
 * lowest unsettled one as a single `basic.ack` with `multiple` set (RabbitMQ acks every outstanding
 * delivery up to and including that tag: https://www.rabbitmq.com/docs/confirms#consumer-acks-multiple-parameter),
 * the others one by one. A delivery still being handled is never covered: a tag is part of the run only
 * once it was acked or nacked here. `nack` (with requeue) is sent at once.
 *
 * Delivery tags count up from 1 on each channel, so a channel's first delivery is tag 1 and every tag
 * below the run's start was settled. A delivery settled some other way on this channel stops the run
 * there (its acks are then sent one by one), which costs frames but never acks a delivery early. The tags
 * settled past a delivery still being handled are kept as runs ({@link SettledTags}), bounded by the
 * prefetch window, so a delivery held for hours costs no memory for the thousands acked meanwhile.
 *
 * An ack sent at the end of the turn instead of at once changes nothing for safety: amqplib buffers a
 * frame either way, and a channel that closes before the broker read it requeues the delivery in both
 * cases; its redelivery is processed like any redelivery (a completed run's is a DUPLICATE, acked again).
 * {@link DeliveryAcks.flush} sends what is waiting at once (before the channel is closed on purpose).
 */
export class DeliveryAcks {
  /** The lowest delivery tag not settled yet. */
  #lowest = 1;
  /** Deliveries acked since the last flush, by tag. */
  readonly #waiting = new Map<number, ConsumeMessage>();
  /** Tags above `#lowest` settled already (nacked, or acked alone), so that the run can pass them. */
  readonly #settledAhead = new SettledTags();
  #scheduled = false;

  constructor(private readonly channel: ConsumeChannel) {}

  /** Acks `message` at the end of this turn of the event loop (with the acks next to it). */
  ack(message: ConsumeMessage): void {
    this.#waiting.set(message.fields.deliveryTag, message);
    if (!this.#scheduled) {
      this.#scheduled = true;
      process.nextTick(this.#flushAtTurnEnd);
    }
  }

  /**
   * `basic.nack` with requeue, sent at once.
   * @throws amqplib's `IllegalOperationError` when the channel is closed or closing.
   */
  nack(message: ConsumeMessage): void {
    this.channel.nack(message, false, true);
    this.#settled(message.fields.deliveryTag);
  }

  /**
   * Sends the acks waiting, now: the run from the lowest unsettled tag as one `multiple` ack, the rest
   * alone.
   * @throws amqplib's `IllegalOperationError` when the channel is closed or closing (the broker requeues
   *   the deliveries it had not acked).
   */
  flush(): void {
    if (this.#waiting.size === 0) return;
    let tag = this.#lowest;
    let last: ConsumeMessage | undefined;
    for (;;) {
      const message = this.#waiting.get(tag);
      if (message !== undefined) {
        this.#waiting.delete(tag);
        last = message;
        tag++;
        continue;
      }
      const next = this.#settledAhead.skipFrom(tag);
      if (next === tag) break;
      tag = next;
    }
    this.#lowest = tag;
    const alone = [...this.#waiting.values()];
    this.#waiting.clear();
    if (last !== undefined) this.channel.ack(last, true);
    for (const message of alone) {
      this.channel.ack(message);
      this.#settled(message.fields.deliveryTag);
    }
  }

  readonly #flushAtTurnEnd = (): void => {
    this.#scheduled = false;
    try {
      this.flush();
    } catch {
      // The channel closed meanwhile: its 'close' is reported by ConsumerChannels, and the broker requeues
      // what it had not acked (see the class comment).
    }
  };

  /** Remembers a tag settled out of the run's order, so that the run can pass it later. */
  #settled(tag: number): void {
    if (tag === this.#lowest) {
      this.#lowest = this.#settledAhead.skipFrom(tag + 1);
      return;
    }
    if (tag > this.#lowest) this.#settledAhead.add(tag);
  }

  /** How many runs of settled tags are kept past the lowest unsettled one (for tests). */
  get settledRuns(): number {
    return this.#settledAhead.runCount;
  }
}
