import type { ConsumeMessage } from 'amqplib';

/** What a handler receives for one delivery. */
export interface RabbitHandlerContext {
  /** The delivery itself (content, fields, properties). */
  readonly message: ConsumeMessage;
  readonly scope: string;
  /** The idempotency key; `undefined` only when `missingKey: 'process'` ran a delivery without one. */
  readonly key: string | undefined;
  /**
   * The claim's fencing token: it grows with every claim of the key. Make downstream writes conditional
   * on it. 0 when the handler runs without idempotency (`UNPROTECTED`).
   */
  readonly fencingToken: number;
  /** Which attempt this is, 1 for the first (the record's count; a header count when unprotected). */
  readonly attempt: number;
  /**
   * `ACQUIRED_STALE` when an earlier holder's lease expired mid-handler (its side effect may be partial);
   * `UNPROTECTED` for a delivery without a key run under `missingKey: 'process'`.
   */
  readonly outcome: 'ACQUIRED' | 'ACQUIRED_STALE' | 'UNPROTECTED';
  /** Aborts with a `LeaseLostError` when the claim is lost; pass it to I/O that accepts a signal. */
  readonly signal: AbortSignal;
}

/**
 * The operation run for one delivery. Its resolved value is stored as the record's result and replayed to
 * duplicates. Throw `NonRetryableError` (from core) for a failure that must be dead-lettered at once; any
 * other error is retried through a delay tier until `maxAttempts`.
 */
export type RabbitHandler<T> = (context: RabbitHandlerContext) => Promise<T> | T;
