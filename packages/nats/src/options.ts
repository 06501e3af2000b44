import {
  type BackoffOptions,
  InvalidOptionError,
  type Payload,
  type RunOverrides,
  type TelemetryOptions,
} from '@idempotent-consumer/core';
import { check } from '@idempotent-consumer/core/kit';
import type { JsMsg } from '@nats-io/jetstream';

/** The header a JetStream producer sets to deduplicate inside the stream's duplicate window. */
export const MSG_ID_HEADER = 'Nats-Msg-Id';

/** Reads the idempotency key of a message; `undefined` or `''` when it has none. */
export type IdempotencyKeyExtractor = (message: JsMsg) => string | undefined;

/** The default key: the `Nats-Msg-Id` header. */
export const defaultIdempotencyKey: IdempotencyKeyExtractor = (message) =>
  message.headers?.get(MSG_ID_HEADER) || undefined;

/** Options of a {@link NatsIdempotentConsumer}. */
export interface NatsIdempotencyOptions extends RunOverrides {
  /** The stream the messages are in. */
  readonly stream: string;
  /** The durable pull consumer on it, created beforehand with `ack_policy: explicit`. */
  readonly consumer: string;
  /**
   * Where dead letters are published. A stream other than `stream` must capture this subject: `start()`
   * checks it and throws `TopologyMismatchError` otherwise.
   */
  readonly deadLetterSubject: string;
  /** Scope of the records (docs/design.md#vocabulary). @defaultValue `<stream>/<consumer>` */
  readonly scope?: string;
  /**
   * Reads a message's key; a throw makes the message an `invalid-key` dead letter.
   * @defaultValue the `Nats-Msg-Id` header
   */
  readonly idempotencyKey?: IdempotencyKeyExtractor;
  /**
   * A message without a key: `'dead-letter'` (reason `missing-key`), or `'process'` without
   * idempotency (outcome `UNPROTECTED`, retried until its delivery count reaches `maxAttempts`).
   * @defaultValue `'dead-letter'`
   */
  readonly missingKey?: 'dead-letter' | 'process';
  /**
   * What is fingerprinted with the key, so another payload under the same key is a `PAYLOAD_MISMATCH`:
   * `true` the message data, `false` nothing, or a function. @defaultValue `true`
   */
  readonly fingerprint?: boolean | ((message: JsMsg) => Payload | undefined);
  /**
   * How long a message that meets CONFLICT waits for the holder's outcome, in milliseconds, calling
   * `working()` meanwhile: a DUPLICATE is acked at once, a release lets it run. 0: no wait. @defaultValue 5000
   */
  readonly conflictWaitMs?: number;
  /** Longest `nak` delay of a CONFLICT still held after `conflictWaitMs`, in milliseconds. @defaultValue 5000 */
  readonly maxConflictDelayMs?: number;
  /**
   * The `nak` delay after a retryable handler error, by the record's attempt.
   * @defaultValue `{ baseMs: 1000, maxMs: 300000, factor: 2, jitter: 'full' }`
   */
  readonly retryBackoff?: BackoffOptions;
  /** Wait between pings while the store does not answer. @defaultValue `{ baseMs: 250, maxMs: 5000, factor: 2, jitter: 'full' }` */
  readonly storeProbeBackoff?: BackoffOptions;
  /** Most messages in flight; the pull batch size too. @defaultValue 16 */
  readonly concurrency?: number;
  /** How long `stop()` waits for the messages in flight, in milliseconds. @defaultValue 30000 */
  readonly stopTimeoutMs?: number;
  /** OpenTelemetry spans and metrics (core README, "Telemetry"); `false` for none. @defaultValue the global providers */
  readonly telemetry?: TelemetryOptions | false;
}

/** {@link NatsIdempotencyOptions} with defaults applied. */
export interface ResolvedNatsOptions {
  readonly stream: string;
  readonly consumer: string;
  readonly deadLetterSubject: string;
  readonly scope: string;
  readonly idempotencyKey: IdempotencyKeyExtractor;
  readonly missingKey: 'dead-letter' | 'process';
  readonly payload: (message: JsMsg) => Payload | undefined;
  readonly overrides: RunOverrides;
  readonly maxConflictDelayMs: number;
  readonly retryBackoff: BackoffOptions;
  readonly storeProbeBackoff: BackoffOptions;
  readonly concurrency: number;
  readonly stopTimeoutMs: number;
  readonly telemetry: TelemetryOptions | false | undefined;
}

/**
 * Applies the defaults and checks every option.
 * @throws {@link @idempotent-consumer/core!InvalidOptionError} naming the option that is missing or out of range.
 */
export function resolveNatsOptions(options: NatsIdempotencyOptions): ResolvedNatsOptions {
  if (!options || typeof options !== 'object') throw new InvalidOptionError('options must be an object');
  const stream = check.nonEmptyString('stream', options.stream);
  const consumer = check.nonEmptyString('consumer', options.consumer);
  const fp = options.fingerprint ?? true;
  if (typeof fp !== 'boolean' && typeof fp !== 'function') {
    throw new InvalidOptionError(`fingerprint must be a boolean or a function, got ${String(fp)}`);
  }
  const key = options.idempotencyKey ?? defaultIdempotencyKey;
  if (typeof key !== 'function') throw new InvalidOptionError('idempotencyKey must be a function');
  return {
    stream,
    consumer,
    deadLetterSubject: check.nonEmptyString('deadLetterSubject', options.deadLetterSubject),
    scope: check.nonEmptyString('scope', options.scope, `${stream}/${consumer}`),
    idempotencyKey: key,
    missingKey: check.oneOf('missingKey', options.missingKey, ['dead-letter', 'process'], 'dead-letter'),
    payload: fp === true ? (m) => m.data : fp === false ? () => undefined : fp,
    overrides: check.runOverrides({
      ...options,
      conflictWaitMs: check.conflictWaitMs(options.conflictWaitMs),
    }),
    maxConflictDelayMs: check.maxConflictDelayMs(options.maxConflictDelayMs),
    retryBackoff: check.backoff('retryBackoff', options.retryBackoff, { baseMs: 1000, maxMs: 300_000 }),
    storeProbeBackoff: check.storeProbeBackoff(options.storeProbeBackoff),
    concurrency: check.positiveInteger('concurrency', options.concurrency, 16),
    stopTimeoutMs: check.stopTimeoutMs(options.stopTimeoutMs),
    telemetry: check.telemetry('telemetry', options.telemetry),
  };
}
