import type { AmqpConnection, ConsumeChannel, PublishChannel } from './amqp-types';
import { closeOrClosed } from './close';
import { type CloseReason, closeReasonOf } from './close-reason';
import { ConfirmPublisher } from './confirm-publisher';
import { DeliveryAcks } from './delivery-acks';

/** Which of its channels closed, why, and whether the whole connection went with it. */
export interface ChannelClosed {
  readonly channel: 'consume' | 'publish';
  /** The channel's error, else the connection's close error; `undefined` for a close the client asked for. */
  readonly error: unknown;
  readonly reason: CloseReason | undefined;
  /** Whether the connection closed (its channels cannot be reopened on it). */
  readonly connectionClosed: boolean;
}

/**
 * The channels a consumer opens on its connection, and only those (it never closes the connection):
 * a consume channel (manual acks, `prefetch`) and a confirm channel for republishing, reopened on first
 * use after it closed. Reports a channel that closed without {@link ConsumerChannels.close}, with the
 * broker's reason read from the channel's error or, when the broker closed the whole connection, from
 * the connection's `close` event.
 */
export class ConsumerChannels {
  #connection: AmqpConnection | undefined;
  #connectionError: unknown;
  #connectionClosed = false;
  #consume: ConsumeChannel | undefined;
  #consumeAcks: DeliveryAcks | undefined;
  #publishChannel: PublishChannel | undefined;
  #publisher: ConfirmPublisher | undefined;
  #publisherOpening: Promise<ConfirmPublisher> | undefined;
  #closing = false;
  /** Set by {@link ConsumerChannels.dispose}, for good: a channel that opens after it is closed at once. */
  #disposed = false;

  constructor(private readonly onClosed: (event: ChannelClosed) => void) {}

  /** The open consume channel, `undefined` while there is none. */
  get consume(): ConsumeChannel | undefined {
    return this.#consume;
  }

  /**
   * The acks of `channel` while it is the open consume channel (coalesced: see {@link DeliveryAcks});
   * `undefined` once it closed or was replaced: its deliveries are the broker's again.
   */
  acks(channel: ConsumeChannel): DeliveryAcks | undefined {
    return channel === this.#consume ? this.#consumeAcks : undefined;
  }

  /** The connection the channels were opened on, `undefined` before {@link ConsumerChannels.open}. */
  get connection(): AmqpConnection | undefined {
    return this.#connection;
  }

  /** Whether the connection emitted `close`: no channel can be opened on it again. */
  get connectionClosed(): boolean {
    return this.#connectionClosed;
  }

  /**
   * Opens the consume channel (with `basic.qos prefetch`) and the confirm channel on `connection`,
   * replacing channels opened before (which must be closed already).
   * @throws the broker's or the socket's error when a channel cannot be opened; an `Error` once
   *   {@link ConsumerChannels.dispose} was called (a start or reconnect that outlived `stop()`): a channel
   *   that opened meanwhile is closed.
   */
  async open(connection: AmqpConnection, prefetch: number): Promise<ConsumeChannel> {
    if (this.#disposed) throw disposedError();
    this.#closing = false;
    if (connection !== this.#connection) {
      this.#detach();
      this.#connection = connection;
      this.#connectionError = undefined;
      this.#connectionClosed = false;
      connection.on?.('close', this.#onConnectionClose);
      connection.on?.('error', this.#onConnectionError);
    }
    const channel = await connection.createChannel();
    let lastError: unknown;
    channel.on('error', (error: unknown) => {
      // The 'close' event that follows reports it; without a listener an 'error' would crash the process.
      lastError = error;
    });
    if (this.#disposed) {
      void closeOrClosed(channel);
      throw disposedError();
    }
    channel.on('close', () => {
      if (this.#consume !== channel) return;
      this.#consume = undefined;
      this.#consumeAcks = undefined;
      if (!this.#closing) this.#report('consume', lastError);
    });
    this.#consume = channel;
    this.#consumeAcks = new DeliveryAcks(channel);
    await channel.prefetch(prefetch);
    await this.publisher();
    return channel;
  }

  /** The confirm channel's publisher, (re)opened on first use after it closed; one open at a time. */
  publisher(): Promise<ConfirmPublisher> {
    if (this.#publisher) return Promise.resolve(this.#publisher);
    this.#publisherOpening ??= this.#openPublisher().finally(() => {
      this.#publisherOpening = undefined;
    });
    return this.#publisherOpening;
  }

  async #openPublisher(): Promise<ConfirmPublisher> {
    const connection = this.#connection;
    if (!connection || this.#closing) throw new Error('The consumer has no open connection');
    const channel = await connection.createConfirmChannel();
    let lastError: unknown;
    channel.on('error', (error: unknown) => {
      // Reported through 'close'; the publisher rejects pending publishes.
      lastError = error;
    });
    if (this.#disposed) {
      void closeOrClosed(channel);
      throw disposedError();
    }
    channel.on('close', () => {
      if (this.#publishChannel !== channel) return;
      this.#publishChannel = undefined;
      this.#publisher = undefined;
      if (!this.#closing) this.#report('publish', lastError);
    });
    this.#publishChannel = channel;
    this.#publisher = new ConfirmPublisher(channel);
    return this.#publisher;
  }

  /**
   * Closes the channels it opened, after sending the acks still waiting for the end of the turn (the
   * broker requeues what they left unacked); done when they are closed, with or without the broker's
   * `close-ok` ({@link closeOrClosed}); never rejects.
   */
  async close(): Promise<void> {
    this.#closing = true;
    try {
      this.#consumeAcks?.flush();
    } catch {
      // Closed already: the broker requeues those deliveries.
    }
    const channels = [this.#publishChannel, this.#consume];
    this.#publishChannel = undefined;
    this.#publisher = undefined;
    this.#consume = undefined;
    this.#consumeAcks = undefined;
    await Promise.all(channels.map((c) => c && closeOrClosed(c)));
  }

  /**
   * {@link ConsumerChannels.close}, and stops listening to the connection, for good (the consumer is
   * done): a channel that a start or reconnect still under way opens afterwards is closed at once.
   */
  async dispose(): Promise<void> {
    this.#disposed = true;
    await this.close();
    this.#detach();
  }

  #detach(): void {
    this.#connection?.off?.('close', this.#onConnectionClose);
    this.#connection?.off?.('error', this.#onConnectionError);
  }

  readonly #onConnectionClose = (error?: unknown): void => {
    this.#connectionClosed = true;
    if (error !== undefined) this.#connectionError = error;
  };

  readonly #onConnectionError = (error?: unknown): void => {
    if (error !== undefined) this.#connectionError = error;
  };

  /**
   * Reports a closed channel with the channel's error, else the connection's. amqplib closes every
   * channel of a connection the broker closed before it emits the connection's `close` with the reason,
   * in the same synchronous call, so the report waits for the microtask after it.
   */
  #report(channel: 'consume' | 'publish', channelError: unknown): void {
    queueMicrotask(() => {
      const error = channelError ?? this.#connectionError;
      const reason =
        channelError !== undefined
          ? closeReasonOf(channelError, 'channel')
          : closeReasonOf(this.#connectionError, 'connection');
      this.onClosed({ channel, error, reason, connectionClosed: this.#connectionClosed });
    });
  }
}

/** The error of an open after {@link ConsumerChannels.dispose}. */
function disposedError(): Error {
  return new Error('The consumer stopped: its channels are closed for good');
}
