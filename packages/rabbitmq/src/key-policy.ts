import { describeError, InvalidKeyError } from '@idempotent-consumer/core';
import type { ConsumeMessage } from 'amqplib';
import type { Decision } from './decide';
import type { IdempotencyKeyExtractor } from './idempotency-key';

/** What the key extractor found on a delivery. */
export type KeyReading =
  | { readonly kind: 'key'; readonly key: string }
  | { readonly kind: 'missing' }
  /** The extractor threw: the delivery is dead-lettered as `invalid-key` (it would throw on every redelivery). */
  | { readonly kind: 'invalid'; readonly error: InvalidKeyError };

/**
 * Reads a delivery's idempotency key and applies `missingKey` to a delivery without one: the one place
 * that says what happens to a delivery before it is claimed.
 */
export class KeyPolicy {
  constructor(
    private readonly extractor: IdempotencyKeyExtractor,
    /** `missingKey`: `dead-letter` or `process`. */
    readonly missingKey: 'dead-letter' | 'process',
  ) {}

  /** Reads the key; never throws. */
  read(message: ConsumeMessage): KeyReading {
    try {
      const key = this.extractor(message);
      return key === undefined ? { kind: 'missing' } : { kind: 'key', key };
    } catch (error) {
      return {
        kind: 'invalid',
        error: new InvalidKeyError(`The idempotency key extractor threw: ${describeError(error)}`, {
          cause: error,
        }),
      };
    }
  }

  /** The decision for a delivery without a key under `missingKey: 'dead-letter'`. */
  static readonly MISSING_KEY_DEAD_LETTER: Decision = {
    action: 'dead-letter',
    reason: 'missing-key',
    attempt: 0,
    error: 'The message carries no idempotency key (missingKey: dead-letter)',
    failedFencingToken: undefined,
  };

  /** The decision for a delivery whose key (or payload fingerprint) cannot be read or is refused. */
  static invalidKeyDeadLetter(error: unknown): Decision {
    return {
      action: 'dead-letter',
      reason: 'invalid-key',
      attempt: 0,
      error: describeError(error),
      failedFencingToken: undefined,
    };
  }
}
