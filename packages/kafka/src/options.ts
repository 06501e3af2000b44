import { type BackoffOptions, InvalidOptionError } from '@idempotent-consumer/core';
import type { KafkaIdempotencyEvent } from './events';
import { defaultKeyExtractor, type KeyExtractor } from './headers';

/**
 * Options of {@link idempotentEachMessage} and {@link idempotentEachBatch}. Give `groupId` (for the default
 * scope) or `scope`. Every other field has a default; see each `@defaultValue`.
 * Behaviour: DESIGN.md, "Outcome → broker action", Kafka column.
 */
export interface KafkaIdempotencyOptions {
  /**
   * The consumer group id, used by the default scope `<groupId>/<topic>`. Required unless `scope` is given.
   */
  groupId?: string;
  /**
   * The scope records of a topic live in: a string, or a function of the topic.
   * @defaultValue `` `${groupId}/${topic}` ``
   */
  scope?: string | ((topic: string) => string);
  /**
   * Reads a message's idempotency key. @defaultValue the `idempotency-key` header, else
   * `<topic>/<partition>/<offset>` ({@link defaultKeyExtractor})
   */
  key?: KeyExtractor;
  /**
   * When `key` returns `undefined`: `reject` dead-letters the message (reason `missing-key`) without running
   * the handler; `process` runs the handler without idempotency (a redelivery may run it again).
   * @defaultValue `'reject'`
   */
  missingKey?: 'reject' | 'process';
  /**
   * Whether the message value is fingerprinted (SHA-256), so the same key with another value is a
   * `PAYLOAD_MISMATCH` and is dead-lettered without running. @defaultValue true
   */
  comparePayload?: boolean;
  /** Overrides the runner's `leaseMs` for these messages, in milliseconds. */
  leaseMs?: number;
  /** Overrides the runner's `maxAttempts` for these messages. */
  maxAttempts?: number;
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
   * How long a message whose key is held by another worker (CONFLICT) waits for the holder in total,
   * inline, in milliseconds, before its partition is paused. @defaultValue `maxInlineDelayMs`
   */
  conflictWaitMs?: number;
  /** How often a waiting message claims again (CONFLICT), in milliseconds. @defaultValue 250 */
  conflictPollIntervalMs?: number;
  /** How often the store is pinged while it does not answer, in milliseconds. @defaultValue 500 */
  storeProbeIntervalMs?: number;
  /**
   * How often the consumer's `heartbeat()` is called during inline waits, in milliseconds. KafkaJS only
   * sends one when its own `heartbeatInterval` has passed. @defaultValue 1000
   */
  brokerHeartbeatIntervalMs?: number;
  /**
   * Where dead letters go: a topic, a function of the source topic, or `false` to only skip such messages
   * (after the record is FAILED and `onEvent` got a `dead-lettered` event). A `producer` is required unless
   * this is `false`. @defaultValue `` `${topic}.dlq` ``
   */
  deadLetterTopic?: string | ((topic: string) => string) | false;
  /** Receives the wrapper's events; a listener that throws is ignored. */
  onEvent?: (event: KafkaIdempotencyEvent) => void;
}

/** {@link KafkaIdempotencyOptions} with defaults applied. */
export interface ResolvedKafkaOptions {
  readonly scopeOf: (topic: string) => string;
  readonly key: KeyExtractor;
  readonly missingKey: 'reject' | 'process';
  readonly comparePayload: boolean;
  readonly leaseMs: number | undefined;
  readonly maxAttempts: number | undefined;
  readonly retryBackoff: BackoffOptions;
  readonly maxInlineDelayMs: number;
  readonly conflictWaitMs: number;
  readonly conflictPollIntervalMs: number;
  readonly storeProbeIntervalMs: number;
  readonly brokerHeartbeatIntervalMs: number;
  readonly deadLetterTopicOf: ((topic: string) => string) | false;
  readonly onEvent: (event: KafkaIdempotencyEvent) => void;
}

function nonNegative(name: string, value: number | undefined, fallback: number, min = 0): number {
  const v = value ?? fallback;
  if (typeof v !== 'number' || !Number.isFinite(v) || v < min) {
    throw new InvalidOptionError(`${name} must be a finite number >= ${min}, got ${String(v)}`);
  }
  return v;
}

/**
 * Applies defaults and checks ranges.
 * @throws {@link InvalidOptionError} when neither `groupId` nor `scope` is given, an option is out of range,
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
  if (
    options.missingKey !== undefined &&
    options.missingKey !== 'reject' &&
    options.missingKey !== 'process'
  ) {
    throw new InvalidOptionError(
      `missingKey must be 'reject' or 'process', got ${String(options.missingKey)}`,
    );
  }
  const maxInlineDelayMs = nonNegative('maxInlineDelayMs', options.maxInlineDelayMs, 5000);
  const onEvent = options.onEvent;
  return {
    scopeOf,
    key: options.key ?? defaultKeyExtractor,
    missingKey: options.missingKey ?? 'reject',
    comparePayload: options.comparePayload ?? true,
    leaseMs: options.leaseMs,
    maxAttempts: options.maxAttempts,
    retryBackoff: { baseMs: 1000, maxMs: 60_000, ...options.retryBackoff },
    maxInlineDelayMs,
    conflictWaitMs: nonNegative('conflictWaitMs', options.conflictWaitMs, maxInlineDelayMs),
    conflictPollIntervalMs: nonNegative('conflictPollIntervalMs', options.conflictPollIntervalMs, 250, 1),
    storeProbeIntervalMs: nonNegative('storeProbeIntervalMs', options.storeProbeIntervalMs, 500, 1),
    brokerHeartbeatIntervalMs: nonNegative(
      'brokerHeartbeatIntervalMs',
      options.brokerHeartbeatIntervalMs,
      1000,
      1,
    ),
    deadLetterTopicOf,
    onEvent: (event) => {
      try {
        onEvent?.(event);
      } catch {
        // A listener's bug must not change what the broker sees.
      }
    },
  };
}
