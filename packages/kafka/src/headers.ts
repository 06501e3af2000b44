import type { KafkaHeaders, KafkaMessageLike } from './types';

/** Header that carries the idempotency key by default (docs/design.md#key-sources). */
export const IDEMPOTENCY_KEY_HEADER = 'idempotency-key';

/**
 * The first value of a header as UTF-8 text, or `undefined` when the message has no such header or it is
 * empty. Header names are matched exactly, as Kafka stores them.
 */
export function headerText(headers: KafkaHeaders | undefined, name: string): string | undefined {
  const raw = headers?.[name];
  const first = Array.isArray(raw) ? raw[0] : raw;
  if (first === undefined) return undefined;
  const text = typeof first === 'string' ? first : first.toString('utf8');
  return text.length === 0 ? undefined : text;
}

/** Where a message was consumed from. */
export interface MessageOrigin {
  readonly topic: string;
  readonly partition: number;
}

/**
 * Reads the idempotency key of a message: `undefined` means the message has none (the `missingKey` policy
 * then applies).
 */
export type IdempotencyKeyExtractor = (
  message: KafkaMessageLike,
  origin: MessageOrigin,
) => string | undefined;

/**
 * The default key (docs/design.md#key-sources): the `idempotency-key` header, else
 * `<topic>/<partition>/<offset>`. The fallback catches redelivery (a replay after a crash or a rebalance)
 * but not a producer that sent the same operation twice: only a producer-set key catches that.
 */
export const defaultKeyExtractor: IdempotencyKeyExtractor = (message, origin) =>
  headerText(message.headers, IDEMPOTENCY_KEY_HEADER) ??
  `${origin.topic}/${origin.partition}/${message.offset}`;
