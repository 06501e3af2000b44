import { EventEmitter } from 'node:events';
import type { ConsumeMessage, Options } from 'amqplib';
import type { AmqpConnection, ConsumeChannel, PublishChannel } from '../src/amqp-types';

/** Everything the fakes saw, in order, shared with a recording store so tests can assert the sequence. */
export type Journal = string[];

/** A call the broker never answers (a connection blocked by a memory or disk alarm): it never settles. */
const unanswered = (): Promise<never> => new Promise<never>(() => {});

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
  /**
   * Calls the broker does not answer, as when it stops reading a connection blocked by a resource alarm:
   * `basic.cancel` (the broker keeps delivering) and `channel.close` (no `close-ok`, no `close` event).
   */
  readonly unanswered = new Set<'cancel' | 'close'>();
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
    this.journal.push('cancel');
    if (this.unanswered.has('cancel')) return unanswered();
    this.onMessage = undefined;
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
    if (this.unanswered.has('close')) return unanswered();
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
  /** Whether `channel.close` goes unanswered (no `close-ok`, no `close` event): see {@link FakeChannel.unanswered}. */
  closeUnanswered = false;

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
    if (this.closeUnanswered) return unanswered();
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

/**
 * A fake connection the consumer owns (given by `connect`): {@link fakeConnection}'s channels, `close()`
 * (unanswered when `closeUnanswered`: no `close-ok`, as on a connection RabbitMQ blocked), and the socket
 * amqplib keeps at `connection.stream`, whose `destroy(error)` ends the connection as amqplib does on a
 * socket error: its channels emit `close`, then the connection `error` and `close`.
 */
export function fakeOwnedConnection(journal: Journal = []) {
  const fake = fakeConnection(journal);
  const events = new EventEmitter();
  events.on('error', () => {}); // the consumer listens too; an unheard 'error' would throw here
  const state = { closeUnanswered: false, closed: false, destroyedWith: undefined as Error | undefined };
  const end = (error?: Error) => {
    if (state.closed) return;
    state.closed = true;
    for (const channel of fake.consumeChannels) channel.emit('close');
    fake.confirm.emit('close');
    if (error) events.emit('error', error);
    events.emit('close', error);
  };
  const socket = {
    destroy(error?: Error) {
      state.destroyedWith ??= error ?? new Error('destroyed');
      end(error);
    },
  };
  const connection = Object.assign(events, fake.connection, {
    async close(): Promise<void> {
      journal.push('connection.close');
      if (state.closeUnanswered) return unanswered();
      end();
    },
    connection: { stream: socket },
  });
  return { ...fake, connection: connection as AmqpConnection, state };
}
