import { EventEmitter } from 'node:events';
import type { ConsumeMessage, Options } from 'amqplib';
import type { AmqpConnection, ConsumeChannel, PublishChannel } from '../src/amqp-types';

/** Everything the fakes saw, in order, shared with a recording store so tests can assert the sequence. */
export type Journal = string[];

/**
 * A fake consume channel: deliveries are pushed by the test; ack/nack/cancel are journaled. An ack with
 * `allUpTo` settles every outstanding delivery up to its tag, as RabbitMQ does, each journaled as its own
 * `ack:<tag>`; acking a tag twice throws, as the broker closes the channel for it (PRECONDITION_FAILED).
 */
export class FakeChannel extends EventEmitter {
  onMessage: ((message: ConsumeMessage | null) => void) | undefined;
  consumes = 0;
  cancels = 0;
  acked: number[] = [];
  nacked: { tag: number; requeue: boolean }[] = [];
  /** How many acks were sent (a `multiple` ack is one). */
  ackFrames = 0;
  #tag = 0;
  readonly #outstanding = new Set<number>();

  constructor(readonly journal: Journal) {
    super();
  }

  async prefetch(): Promise<object> {
    return {};
  }
  async consume(_queue: string, onMessage: (message: ConsumeMessage | null) => void) {
    this.consumes += 1;
    this.onMessage = onMessage;
    this.journal.push('consume');
    return { consumerTag: `ctag-${this.consumes}` };
  }
  async cancel(consumerTag: string) {
    this.cancels += 1;
    this.onMessage = undefined;
    this.journal.push('cancel');
    return { consumerTag };
  }
  ack(message: ConsumeMessage, allUpTo = false): void {
    const tag = message.fields.deliveryTag;
    const tags = allUpTo ? [...this.#outstanding].filter((t) => t <= tag).sort((a, b) => a - b) : [tag];
    if (!this.#outstanding.has(tag)) throw new Error(`PRECONDITION_FAILED - unknown delivery tag ${tag}`);
    this.ackFrames += 1;
    for (const t of tags) {
      this.#outstanding.delete(t);
      this.acked.push(t);
      this.journal.push(`ack:${t}`);
    }
  }
  nack(message: ConsumeMessage, _allUpTo?: boolean, requeue = true): void {
    if (!this.#outstanding.delete(message.fields.deliveryTag)) {
      throw new Error(`PRECONDITION_FAILED - unknown delivery tag ${message.fields.deliveryTag}`);
    }
    this.nacked.push({ tag: message.fields.deliveryTag, requeue });
    this.journal.push(`nack:${message.fields.deliveryTag}:${requeue}`);
  }
  async close(): Promise<void> {
    this.emit('close');
  }
  async checkQueue(queue: string) {
    return { queue, messageCount: 0, consumerCount: 0 };
  }
  async assertQueue(queue: string) {
    return { queue, messageCount: 0, consumerCount: 0 };
  }
  async checkExchange(): Promise<object> {
    return {};
  }
  async assertExchange(exchange: string) {
    return { exchange };
  }
  async bindQueue(): Promise<object> {
    return {};
  }

  /** Delivers a message to the registered consumer. */
  deliver(
    content: string,
    properties: Partial<ConsumeMessage['properties']> = {},
    redelivered = false,
  ): ConsumeMessage {
    this.#tag += 1;
    this.#outstanding.add(this.#tag);
    const message = {
      content: Buffer.from(content),
      fields: {
        deliveryTag: this.#tag,
        redelivered,
        exchange: '',
        routingKey: 'work',
        consumerTag: 'ctag',
      },
      properties: { headers: {}, ...properties },
    } as unknown as ConsumeMessage;
    if (!this.onMessage) throw new Error('no consumer registered');
    this.onMessage(message);
    return message;
  }
}

/** A published copy and how to answer its confirm. */
export interface Published {
  exchange: string;
  routingKey: string;
  options: Options.Publish;
  confirm(error?: Error): void;
}

/** A fake confirm channel: publishes wait until the test confirms them (or `autoConfirm`). */
export class FakeConfirmChannel extends EventEmitter {
  published: Published[] = [];
  autoConfirm = true;

  constructor(readonly journal: Journal) {
    super();
  }

  publish(
    exchange: string,
    routingKey: string,
    _content: Buffer,
    options: Options.Publish,
    callback: (err: unknown, ok: object) => void,
  ): boolean {
    const entry: Published = {
      exchange,
      routingKey,
      options,
      confirm: (error) => {
        this.journal.push(`${error ? 'nacked' : 'confirmed'}:${routingKey}`);
        callback(error ?? null, {});
      },
    };
    this.published.push(entry);
    this.journal.push(`publish:${routingKey}`);
    if (this.autoConfirm) setImmediate(() => entry.confirm());
    return true;
  }
  async close(): Promise<void> {
    this.emit('close');
  }
}

/**
 * A fake connection: every open of the consumer's channels asks for a topology scratch channel, then a
 * consume channel. The first consume channel is `channel`; channels opened after a close (a reconnect)
 * are new ones, listed in `consumeChannels`. One confirm channel serves every open.
 */
export function fakeConnection(journal: Journal = []) {
  const channel = new FakeChannel(journal);
  const consumeChannels: FakeChannel[] = [];
  const confirm = new FakeConfirmChannel(journal);
  let created = 0;
  const connection: AmqpConnection = {
    async createChannel() {
      created += 1;
      if (created % 2 === 1) return new FakeChannel([]) as unknown as ConsumeChannel;
      const next = consumeChannels.length === 0 ? channel : new FakeChannel(journal);
      consumeChannels.push(next);
      return next as unknown as ConsumeChannel;
    },
    async createConfirmChannel() {
      return confirm as unknown as PublishChannel;
    },
  };
  return { connection, channel, consumeChannels, confirm, journal };
}
