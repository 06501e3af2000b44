import type { Message } from '@aws-sdk/client-sqs';
import {
  type BackoffOptions,
  InvalidOptionError,
  type Payload,
  type RunOverrides,
  type TelemetryOptions,
} from '@idempotent-consumer/core';
import { check } from '@idempotent-consumer/core/kit';
import { defaultIdempotencyKey, queueNameFromUrl } from './message-attributes';

/**
 * Where messages that must not be retried go (attempts exhausted, non-retryable error, payload mismatch,
 * missing or invalid key): `{ queueUrl }` sends a copy to that dead-letter queue (same body and attributes,
 * plus the `DEAD_LETTER_ATTRIBUTES` while the 10-attribute limit allows) and then deletes the message;
 * `'redrive-policy'` leaves it to the source queue's own `RedrivePolicy`: the message is made visible again
 * at once, and SQS moves it to the dead-letter queue once its receive count passes `maxReceiveCount`
 * (every further receive meets the FAILED record and runs nothing). Either mode is checked with
 * `GetQueueAttributes` before the first receive: a queue without a `RedrivePolicy`, or a dead-letter queue
 * that does not exist, is a `TopologyMismatchError`.
 */
export type DeadLetterTarget = { readonly queueUrl: string } | 'redrive-policy';

/** Reads a message's idempotency key; `undefined` when it has none. A throw dead-letters it as `invalid-key`. */
export type IdempotencyKeyExtractor = (message: Message) => string | undefined;

/** Options shared by {@link IdempotentSqsPoller} and the sqs-consumer wiring. */
export interface SqsIdempotencyOptions extends RunOverrides {
  /** URL of the queue the messages come from (visibility changes and deletes are sent to it). */
  readonly queueUrl: string;
  /** Scope of the records (docs/design.md#vocabulary). @defaultValue the queue name, taken from `queueUrl` */
  readonly scope?: string;
  /**
   * Extracts the idempotency key of a message; `undefined` or `''` means the message has none (see
   * `missingKey`); a throwing extractor is an invalid key: the message is dead-lettered as `invalid-key`.
   * @defaultValue the `idempotency-key` message attribute (`IDEMPOTENCY_KEY_ATTRIBUTE`), else `MessageId`
   */
  readonly idempotencyKey?: IdempotencyKeyExtractor;
  /**
   * What happens to a message without an idempotency key: `'dead-letter'` (reason `missing-key`) or
   * `'process'` (the handler runs without idempotency: outcome `UNPROTECTED`, fencing token 0; a handler
   * error is retried after a visibility backoff until `ApproximateReceiveCount` reaches `maxAttempts`,
   * then dead-lettered as `attempts-exhausted`). @defaultValue `'dead-letter'`
   */
  readonly missingKey?: 'dead-letter' | 'process';
  /**
   * The payload fingerprinted (SHA-256) with the key, so that another payload under the same key is a
   * `PAYLOAD_MISMATCH` (dead-lettered): `true` the message body, `false` no comparison, or a function
   * returning the payload (`undefined`: no comparison for that message). @defaultValue `true`
   */
  readonly fingerprint?: boolean | ((message: Message) => Payload | undefined);
  /** Overrides the runner's `leaseMs` for these messages, in milliseconds. */
  readonly leaseMs?: number;
  /** Overrides the runner's `maxAttempts` for these messages (also bounds unprotected retries). */
  readonly maxAttempts?: number;
  /** Overrides the runner's `handlerTimeoutMs` for these messages, in milliseconds (0: no limit). */
  readonly handlerTimeoutMs?: number;
  /**
   * How long a message that meets CONFLICT (another worker holds the key) waits for the holder's outcome,
   * in milliseconds, before it is made visible again (the runner's bounded wait,
   * `Idempotency.waitForOutcome`): the holder's complete answers DUPLICATE (delete) within milliseconds,
   * its failure FAILED (dead-letter), its release lets this delivery run. The message's visibility timeout
   * is first extended to cover the wait. 0: no wait. @defaultValue 5000
   */
  readonly conflictWaitMs?: number;
  /**
   * The longest visibility timeout of a message still in CONFLICT after `conflictWaitMs`, in
   * milliseconds (rounded up to whole seconds, at least 1 s): `min(holder's remaining lease,
   * maxConflictDelayMs)`. @defaultValue 5000
   */
  readonly maxConflictDelayMs?: number;
  /**
   * Visibility timeout after a retryable handler error, from the message's `ApproximateReceiveCount`
   * (`computeBackoffMs(receiveCount, retryBackoff)`, rounded up to whole seconds, at most 12 h).
   * @defaultValue `{ baseMs: 1000, maxMs: 300000, factor: 2, jitter: 'full' }`
   */
  readonly retryBackoff?: BackoffOptions;
  /**
   * How often the store is pinged while consumption is paused because it did not answer (fail closed),
   * in milliseconds between pings (probe n waits `computeBackoffMs(n, storeProbeBackoff)`).
   * @defaultValue the kit's `DEFAULT_STORE_PROBE_BACKOFF`, `{ baseMs: 250, maxMs: 5000, factor: 2, jitter: 'full' }`
   */
  readonly storeProbeBackoff?: BackoffOptions;
  /** Where exhausted and non-retryable messages go. @defaultValue `'redrive-policy'` */
  readonly deadLetter?: DeadLetterTarget;
  /**
   * Extend the message's visibility timeout on every lease heartbeat, to the lease's remaining time, so SQS
   * does not deliver it again while the handler runs. @defaultValue true
   */
  readonly extendVisibility?: boolean;
  /**
   * OpenTelemetry: a span per message and the `idempotent-consumer` metrics (core README, "Telemetry"),
   * through the optional peer dependency `@opentelemetry/api` (without it, nothing). `false`: none.
   * @defaultValue the global tracer and meter providers of `@opentelemetry/api`
   */
  readonly telemetry?: TelemetryOptions | false;
}

/** {@link SqsIdempotencyOptions} with defaults applied (internal). */
export interface ResolvedSqsIdempotencyOptions {
  readonly queueUrl: string;
  readonly scope: string;
  readonly idempotencyKey: IdempotencyKeyExtractor;
  readonly missingKey: 'dead-letter' | 'process';
  /** The payload fingerprinted for a message (`undefined`: no comparison). */
  readonly payload: (message: Message) => Payload | undefined;
  /** The per-run overrides passed to the runner (`leaseMs`, `maxAttempts`, `handlerTimeoutMs` when set). */
  readonly overrides: RunOverrides;
  readonly leaseMs: number | undefined;
  readonly maxAttempts: number | undefined;
  readonly conflictWaitMs: number;
  readonly maxConflictDelayMs: number;
  readonly retryBackoff: BackoffOptions;
  readonly storeProbeBackoff: BackoffOptions;
  readonly deadLetter: DeadLetterTarget;
  readonly extendVisibility: boolean;
  readonly telemetry: TelemetryOptions | false | undefined;
}

/**
 * Applies defaults and checks the shared options.
 * @throws {@link @idempotent-consumer/core!InvalidOptionError} when `queueUrl` is missing or an option is out of range.
 */
export function resolveSqsOptions(options: SqsIdempotencyOptions): ResolvedSqsIdempotencyOptions {
  if (!options || typeof options !== 'object') throw new InvalidOptionError('options must be an object');
  const queueUrl = check.nonEmptyString('queueUrl', options.queueUrl);
  const scope = check.nonEmptyString('scope', options.scope, queueNameFromUrl(queueUrl));
  const missingKey = check.oneOf('missingKey', options.missingKey, ['dead-letter', 'process'], 'dead-letter');
  const deadLetter = options.deadLetter ?? 'redrive-policy';
  if (
    deadLetter !== 'redrive-policy' &&
    (typeof deadLetter !== 'object' || typeof deadLetter.queueUrl !== 'string' || deadLetter.queueUrl === '')
  ) {
    throw new InvalidOptionError("deadLetter must be { queueUrl } or 'redrive-policy'");
  }
  const fp = options.fingerprint ?? true;
  let payload: (message: Message) => Payload | undefined;
  if (fp === true) payload = (m) => m.Body;
  else if (fp === false) payload = () => undefined;
  else if (typeof fp === 'function') payload = fp;
  else throw new InvalidOptionError(`fingerprint must be a boolean or a function, got ${String(fp)}`);
  check.runOverrides(options);
  return {
    queueUrl,
    scope,
    idempotencyKey: options.idempotencyKey ?? defaultIdempotencyKey,
    missingKey,
    payload,
    overrides: check.runOverrides({
      leaseMs: options.leaseMs,
      maxAttempts: options.maxAttempts,
      handlerTimeoutMs: options.handlerTimeoutMs,
    }),
    leaseMs: options.leaseMs,
    maxAttempts: options.maxAttempts,
    conflictWaitMs: check.conflictWaitMs(options.conflictWaitMs),
    maxConflictDelayMs: check.maxConflictDelayMs(options.maxConflictDelayMs),
    retryBackoff: check.backoff('retryBackoff', options.retryBackoff, { baseMs: 1000, maxMs: 300_000 }),
    storeProbeBackoff: check.storeProbeBackoff(options.storeProbeBackoff),
    deadLetter,
    extendVisibility: options.extendVisibility ?? true,
    telemetry: check.telemetry('telemetry', options.telemetry),
  };
}
