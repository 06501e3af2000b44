import type { Channel, ConfirmChannel } from 'amqplib';

/**
 * The part of an amqplib channel the consumer uses to receive and settle deliveries (and to declare or
 * check its topology on a scratch channel). Typed structurally so that a fake can stand in for it in
 * unit tests; a real `Channel` from amqplib 0.10.x (typed by `@types/amqplib`), 1.x or 2.x satisfies it.
 */
export type ConsumeChannel = Pick<
  Channel,
  | 'on'
  | 'prefetch'
  | 'consume'
  | 'cancel'
  | 'ack'
  | 'nack'
  | 'close'
  | 'checkQueue'
  | 'assertQueue'
  | 'checkExchange'
  | 'assertExchange'
  | 'bindQueue'
>;

/** The part of an amqplib confirm channel the consumer republishes on (`ChannelModel.createConfirmChannel()`). */
export type PublishChannel = Pick<ConfirmChannel, 'on' | 'publish' | 'close'>;

/**
 * What the consumer needs from an amqplib connection: a way to open its own channels. A `ChannelModel`
 * (`await amqplib.connect(url)`) and a `RecoveringChannelModel` both satisfy it. The consumer never
 * closes the connection; it closes only the channels it opened.
 */
export interface AmqpConnection {
  createChannel(): Promise<ConsumeChannel>;
  createConfirmChannel(): Promise<PublishChannel>;
  /**
   * Connection events (amqplib's `ChannelModel` is an EventEmitter): when present, the consumer listens
   * to `close` (and `error`) to say why its channels closed when the broker closed the whole connection.
   */
  on?(event: 'close' | 'error', listener: (error?: unknown) => void): unknown;
  /** Removes a listener added with `on` (at `stop()`). */
  off?(event: 'close' | 'error', listener: (error?: unknown) => void): unknown;
}
