import type { Message } from '@aws-sdk/client-sqs';
import { type BackoffOptions, type HandlerContext, InvalidOptionError } from '@idempotent-consumer/core';
import { defaultIdempotencyKey, queueNameFromUrl } from './message-attributes';

/**
 * The operation run for one SQS message. It receives the message and the claim's context (fencing token,
 * attempt, abort signal); its resolved value is stored as the record's result. Throw to have it retried
 * (after a visibility backoff), or throw a `NonRetryableError` to dead-letter the message at once.
 */
export type SqsMessageHandler<T> = (message: Message, context: HandlerContext) => Promise<T> | T;

/**
 * Where messages that must not be retried go (attempts exhausted, non-retryable error, payload mismatch,
 * missing key): `{ queueUrl }` sends a copy to that dead-letter queue (same body and attributes, plus
 * `x-dead-letter-reason`, `x-error` and `x-original-message-id` while the 10-attribute limit allows) and
 * then deletes the message; `'redrive-policy'` leaves it to the source queue's own `RedrivePolicy`: the
 * message is made visible again after the retry backoff, and SQS moves it to the dead-letter queue once its
 * receive count passes `maxReceiveCount` (every further receive meets the FAILED record and runs nothing).
 */
export type DeadLetterTarget = { readonly queueUrl: string } | 'redrive-policy';

/** Options shared by the sqs-consumer handler wrappers and {@link IdempotentSqsPoller}. */
export interface SqsIdempotencyOptions {
  /** URL of the queue the messages come from (visibility changes and deletes are sent to it). */
  readonly queueUrl: string;
  /** Scope of the records (DESIGN.md, "scope"). @defaultValue the queue name, taken from `queueUrl` */
  readonly scope?: string;
  /**
   * Extracts the idempotency key of a message; `undefined` means the message has none (see
   * `onMissingKey`). @defaultValue {@link defaultIdempotencyKey}: the `idempotency-key` attribute, else `MessageId`
   */
  readonly idempotencyKey?: (message: Message) => string | undefined;
  /**
   * What happens to a message without an idempotency key: `dead-letter` (a `MissingKeyError` is recorded
   * as the reason) or `process` (the handler runs without idempotency, fencing token 0, and the outcome is
   * reported as `UNPROTECTED`). @defaultValue `'dead-letter'`
   */
  readonly onMissingKey?: 'dead-letter' | 'process';
  /**
   * What the payload fingerprint (SHA-256) is computed from: the message `body` (a different body under the same
   * key is a `PAYLOAD_MISMATCH` and is dead-lettered), `none`, or a function returning the payload to fingerprint. @defaultValue `'body'`
   */
  readonly fingerprint?: 'body' | 'none' | ((message: Message) => string | undefined);
  /** Overrides the runner's `leaseMs` for these messages, in milliseconds. */
  readonly leaseMs?: number;
  /** Overrides the runner's `maxAttempts` for these messages. */
  readonly maxAttempts?: number;
  /**
   * Visibility timeout after a retryable handler error, from the message's `ApproximateReceiveCount`
   * (`computeBackoffMs(receiveCount, retryBackoff)`, rounded up to whole seconds, at most 12 h).
   * @defaultValue `{ baseMs: 1000, maxMs: 300000, factor: 2, jitter: 'full' }`
   */
  readonly retryBackoff?: BackoffOptions;
  /** Where exhausted and non-retryable messages go. @defaultValue `'redrive-policy'` */
  readonly deadLetter?: DeadLetterTarget;
  /**
   * Extend the message's visibility timeout on every lease heartbeat, to the lease's remaining time, so SQS
   * does not deliver it again while the handler runs. @defaultValue true
   */
  readonly extendVisibility?: boolean;
}

/** {@link SqsIdempotencyOptions} with defaults applied. */
export interface ResolvedSqsIdempotencyOptions {
  readonly queueUrl: string;
  readonly scope: string;
  readonly idempotencyKey: (message: Message) => string | undefined;
  readonly onMissingKey: 'dead-letter' | 'process';
  /** The payload fingerprinted for a message (`undefined`: no comparison). */
  readonly payload: (message: Message) => string | undefined;
  readonly leaseMs: number | undefined;
  readonly maxAttempts: number | undefined;
  readonly retryBackoff: BackoffOptions;
  readonly deadLetter: DeadLetterTarget;
  readonly extendVisibility: boolean;
}

/**
 * Applies defaults and checks the shared options.
 * @throws {@link InvalidOptionError} when `queueUrl` is missing or an option is out of range.
 */
export function resolveSqsOptions(options: SqsIdempotencyOptions): ResolvedSqsIdempotencyOptions {
  if (!options || typeof options.queueUrl !== 'string' || options.queueUrl === '') {
    throw new InvalidOptionError('queueUrl must be a non-empty string');
  }
  const scope = options.scope ?? queueNameFromUrl(options.queueUrl);
  if (typeof scope !== 'string' || scope === '')
    throw new InvalidOptionError('scope must be a non-empty string');
  const onMissingKey = options.onMissingKey ?? 'dead-letter';
  if (onMissingKey !== 'dead-letter' && onMissingKey !== 'process') {
    throw new InvalidOptionError(
      `onMissingKey must be 'dead-letter' or 'process', got ${String(onMissingKey)}`,
    );
  }
  const deadLetter = options.deadLetter ?? 'redrive-policy';
  if (
    deadLetter !== 'redrive-policy' &&
    (typeof deadLetter !== 'object' || typeof deadLetter.queueUrl !== 'string' || deadLetter.queueUrl === '')
  ) {
    throw new InvalidOptionError("deadLetter must be { queueUrl } or 'redrive-policy'");
  }
  const fp = options.fingerprint ?? 'body';
  let fingerprint: (message: Message) => string | undefined;
  if (fp === 'body') fingerprint = (m) => m.Body;
  else if (fp === 'none') fingerprint = () => undefined;
  else if (typeof fp === 'function') fingerprint = fp;
  else throw new InvalidOptionError(`fingerprint must be 'body', 'none' or a function, got ${String(fp)}`);
  for (const [name, value] of [
    ['leaseMs', options.leaseMs],
    ['maxAttempts', options.maxAttempts],
  ] as const) {
    if (value !== undefined && !(Number.isSafeInteger(value) && value >= 1)) {
      throw new InvalidOptionError(`${name} must be an integer >= 1, got ${value}`);
    }
  }
  return {
    queueUrl: options.queueUrl,
    scope,
    idempotencyKey: options.idempotencyKey ?? defaultIdempotencyKey,
    onMissingKey,
    payload: fingerprint,
    leaseMs: options.leaseMs,
    maxAttempts: options.maxAttempts,
    retryBackoff: { baseMs: 1000, maxMs: 300_000, ...options.retryBackoff },
    deadLetter,
    extendVisibility: options.extendVisibility ?? true,
  };
}
