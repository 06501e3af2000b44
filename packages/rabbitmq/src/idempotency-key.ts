import type { ConsumeMessage } from 'amqplib';
import { IDEMPOTENCY_KEY_HEADER } from './headers';

/** Reads the idempotency key of a delivery; `undefined` when it carries none. */
export type IdempotencyKeyExtractor = (message: ConsumeMessage) => string | undefined;

/**
 * The default key source (docs/design.md#key-sources): the AMQP `message-id` property, else the
 * `idempotency-key` header. Numbers are turned into strings; empty strings count as missing.
 */
export const defaultIdempotencyKey: IdempotencyKeyExtractor = (message) => {
  const fromProperty = asKey(message.properties?.messageId);
  if (fromProperty !== undefined) return fromProperty;
  return asKey(message.properties?.headers?.[IDEMPOTENCY_KEY_HEADER]);
};

function asKey(value: unknown): string | undefined {
  if (typeof value === 'string') return value.length > 0 ? value : undefined;
  if (typeof value === 'number' && Number.isFinite(value)) return String(value);
  if (Buffer.isBuffer(value) && value.length > 0) return value.toString('utf8');
  return undefined;
}
