import {
  type BackoffOptions,
  InvalidOptionError,
  type Payload,
  type RunOverrides,
  type TelemetryOptions,
} from '@idempotent-consumer/core';
import { check } from '@idempotent-consumer/core/kit';
import { defaultKeyExtractor, type IdempotencyKeyExtractor } from './headers';
import type { KafkaMessageLike } from './types';

/** Reads what a message's fingerprint is computed from; `undefined`: no payload check for it. */
export type FingerprintSource = (message: KafkaMessageLike) => Payload | undefined;

/**
 * Options of {@link idempotentEachMessage} and {@link idempotentEachBatch}. Give `groupId` (for the default
 * scope) or `scope`. Every other field has a default; see each `@defaultValue`. The runner overrides
 * (`leaseMs`, `maxAttempts`, `conflictWaitMs`, `handlerTimeoutMs`) are the core kit's `RunOverrides`, as in
 * the RabbitMQ and SQS adapters.
 * Behaviour: docs/design.md#outcome-to-broker-action, Kafka column.
 */
export interface KafkaIdempotencyOptions extends RunOverrides {
  /**
   * The consumer group id, used by the default scope `<groupId>/<topic>`. Required unless `scope` is given.
   */
  groupId?: string;
  /**
   * The scope records of a topic live in: a string, or a function of the topic. A function that throws
   * leaves the message unresolved: its partition pauses one `retryBackoff` step (a `storeError` event,
   * `operation` `process`) and the message is fetched again.
   * @defaultValue `` `${groupId}/${topic}` ``
   */
  scope?: string | ((topic: string) => string);
  /**
   * Reads a message's idempotency key; one that throws makes the message an invalid-key dead letter.
   * @defaultValue the `idempotency-key` header, else `<topic>/<partition>/<offset>` (`defaultKeyExtractor`)
   */
  idempotencyKey?: IdempotencyKeyExtractor;
  /**
   * When `idempotencyKey` returns `undefined`: `dead-letter` sends the message to the dead-letter topic
   * (reason `missing-key`) without running the handler; `process` runs the handler without idempotency
   * (outcome `UNPROTECTED`; a redelivery may run it again; a throw is retried with `retryBackoff` up to
   * `maxAttempts` runs, then dead-lettered). Either way a `missingKey` event is emitted.
   * @defaultValue `'dead-letter'`
   */
  missingKey?: 'dead-letter' | 'process';
  /**
   * What is fingerprinted (SHA-256) so the same key with another payload is a `PAYLOAD_MISMATCH`, dead-lettered
   * without running: `true` the message value, `false` nothing, or a function of the message.
   * @defaultValue true
   */
  fingerprint?: boolean | FingerprintSource;
  /** Overrides the runner's `leaseMs` for these messages, in milliseconds (an integer >= 1). */
  leaseMs?: number;
  /**
   * Overrides the runner's `maxAttempts` for these messages (an integer >= 1; also the bound on runs of an
   * `UNPROTECTED` message that keeps throwing).
   */
  maxAttempts?: number;
  /**
   * Longest a handler may run, in milliseconds (an integer >= 0; 0: no limit): past it the handler's
   * `signal` aborts with a `HandlerTimeoutError` and the run counts as a retryable failure (released, or
   * FAILED at the last attempt). Also bounds `UNPROTECTED` runs. @defaultValue the runner's `handlerTimeoutMs`
   */
  handlerTimeoutMs?: number;
  /**
   * Delay before retrying a message whose handler threw a retryable error (by attempt, see
   * `computeBackoffMs`). @defaultValue `{ baseMs: 1000, maxMs: 60000, factor: 2, jitter: 'full' }`
   */
  retryBackoff?: BackoffOptions;
  /**
   * Delays up to this many milliseconds (retry backoffs, the wait for a conflicting holder, the wait for
   * the store) are spent inside the handler call, heartbeating; longer ones pause the partition instead.
   * `eachMessage` can only leave a message unresolved by throwing, and every throw costs KafkaJS a retry,
   * so inline waits are cheaper for short delays. Keep it well below the consumer's `sessionTimeout`
   * budget and `max.poll.interval.ms` (Confluent's client). @defaultValue 5000
   */
  maxInlineDelayMs?: number;
  /**
   * How long a message whose key is held by another worker (CONFLICT) waits for the holder's outcome,
   * inline and heartbeating, in milliseconds, before its partition is paused (the runner's bounded wait,
   * `Idempotency.waitForOutcome`): the holder's complete answers DUPLICATE within milliseconds, its failure
   * FAILED (dead-letter), its release lets this message run. 0: no wait. @defaultValue `maxInlineDelayMs`
   */
  conflictWaitMs?: number;
  /**
   * How long the partition of a message still in CONFLICT after `conflictWaitMs` is paused, at most, in
   * milliseconds: `min(holder's remaining lease, maxConflictDelayMs)` (at least 100 ms), instead of the
   * holder's whole remaining lease. @defaultValue 5000
   */
  maxConflictDelayMs?: number;
  /**
   * How often the store is pinged while it does not answer (consumption paused): the delay before ping
   * `n` is `computeBackoffMs(n, storeProbeBackoff)`.
   * @defaultValue `{ baseMs: 250, factor: 2, maxMs: 5000, jitter: 'full' }`
   */
  storeProbeBackoff?: BackoffOptions;
  /**
   * How often the consumer's `heartbeat()` is called during inline waits, in milliseconds. KafkaJS only
   * sends one when its own `heartbeatInterval` has passed. @defaultValue 1000
   */
  brokerHeartbeatIntervalMs?: number;
  /**
   * Where dead letters go: a topic, a function of the source topic, or `false` to only skip such messages
   * (after the record is FAILED and a `deadLettered` event with `destination: null`). A `producer` is
   * required unless this is `false`. @defaultValue `` `${topic}.dlq` ``
   */
  deadLetterTopic?: string | ((topic: string) => string) | false;
  /**
   * OpenTelemetry: a span per message and the `idempotent-consumer` metrics (core README, "Telemetry"),
   * through the optional peer dependency `@opentelemetry/api` (without it, nothing). `false`: none.
   * @defaultValue the global tracer and meter providers of `@opentelemetry/api`
   */
  telemetry?: TelemetryOptions | false;
}

/** {@link KafkaIdempotencyOptions} with defaults applied. */
export interface ResolvedKafkaOptions {
  readonly scopeOf: (topic: string) => string;
  readonly idempotencyKey: IdempotencyKeyExtractor;
  readonly missingKey: 'dead-letter' | 'process';
  readonly fingerprintOf: FingerprintSource | false;
  readonly leaseMs: number | undefined;
  readonly maxAttempts: number | undefined;
  /** The `handlerTimeoutMs` override, `undefined`: the runner's. */
  readonly handlerTimeoutMs: number | undefined;
  readonly retryBackoff: BackoffOptions;
  readonly maxInlineDelayMs: number;
  readonly conflictWaitMs: number;
  readonly maxConflictDelayMs: number;
  readonly storeProbeBackoff: BackoffOptions;
  readonly brokerHeartbeatIntervalMs: number;
  readonly deadLetterTopicOf: ((topic: string) => string) | false;
  /** The consumer group, `undefined` when only `scope` was given. */
  readonly groupId: string | undefined;
  readonly telemetry: TelemetryOptions | false | undefined;
}

const messageValue: FingerprintSource = (message) => message.value ?? new Uint8Array(0);

/**
 * Applies defaults and checks ranges.
 * @throws {@link @idempotent-consumer/core!InvalidOptionError} when neither `groupId` nor `scope` is given, an option is out of range,
 *   or dead-lettering is on without a producer.
 */
export function resolveKafkaOptions(
  options: KafkaIdempotencyOptions,
  hasProducer: boolean,
): ResolvedKafkaOptions {
  const { groupId, scope } = options;
  let scopeOf: (topic: string) => string;
  if (typeof scope === 'function') scopeOf = scope;
  else if (typeof scope === 'string' && scope.length > 0) scopeOf = () => scope;
  else if (typeof groupId === 'string' && groupId.length > 0) scopeOf = (topic) => `${groupId}/${topic}`;
  else throw new InvalidOptionError('Give groupId (the default scope is <groupId>/<topic>) or scope');

  const dlt = options.deadLetterTopic;
  let deadLetterTopicOf: ((topic: string) => string) | false;
  if (dlt === false) deadLetterTopicOf = false;
  else if (typeof dlt === 'function') deadLetterTopicOf = dlt;
  else if (typeof dlt === 'string' && dlt.length > 0) deadLetterTopicOf = () => dlt;
  else if (dlt === undefined) deadLetterTopicOf = (topic) => `${topic}.dlq`;
  else throw new InvalidOptionError('deadLetterTopic must be a non-empty string, a function or false');
  if (deadLetterTopicOf && !hasProducer) {
    throw new InvalidOptionError('Dead-lettering needs { producer }; pass one or set deadLetterTopic: false');
  }
  const missingKey = check.oneOf(
    'missingKey',
    options.missingKey,
    ['dead-letter', 'process'] as const,
    'dead-letter',
  );
  const fp = options.fingerprint ?? true;
  if (typeof fp !== 'boolean' && typeof fp !== 'function') {
    throw new InvalidOptionError('fingerprint must be a boolean or a function of the message');
  }
  // The overrides' ranges are the runner's; `conflictWaitMs` is this adapter's own wait (checked below).
  const { leaseMs, maxAttempts, handlerTimeoutMs } = check.runOverrides({
    ...options,
    conflictWaitMs: undefined,
  });
  const maxInlineDelayMs = check.finiteNonNegative('maxInlineDelayMs', options.maxInlineDelayMs, 5000);
  return {
    scopeOf,
    idempotencyKey: options.idempotencyKey ?? defaultKeyExtractor,
    missingKey,
    fingerprintOf: fp === true ? messageValue : fp,
    leaseMs,
    maxAttempts,
    handlerTimeoutMs,
    retryBackoff: check.backoff('retryBackoff', options.retryBackoff),
    maxInlineDelayMs,
    conflictWaitMs: check.conflictWaitMs(options.conflictWaitMs, Math.floor(maxInlineDelayMs)),
    maxConflictDelayMs: check.maxConflictDelayMs(options.maxConflictDelayMs),
    storeProbeBackoff: check.storeProbeBackoff(options.storeProbeBackoff),
    brokerHeartbeatIntervalMs: check.finiteNonNegative(
      'brokerHeartbeatIntervalMs',
      options.brokerHeartbeatIntervalMs,
      1000,
      1,
    ),
    deadLetterTopicOf,
    groupId: typeof groupId === 'string' && groupId.length > 0 ? groupId : undefined,
    telemetry: check.telemetry('telemetry', options.telemetry),
  };
}
