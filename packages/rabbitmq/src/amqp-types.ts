import type { Channel, ConfirmChannel } from 'amqplib';

/**
 * The part of an amqplib channel the consumer uses to receive and settle deliveries (and to declare or
 * check its topology on a scratch channel). Typed structurally so that a fake can stand in for it in
 * unit tests; a real `Channel` from amqplib 2.x (`ChannelModel.createChannel()`) satisfies it.
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
}
