import { type BackoffOptions, InvalidOptionError } from '@idempotent-consumer/core';
import { defaultIdempotencyKey, type IdempotencyKeyExtractor } from './idempotency-key';

/** RabbitMQ's default consumer delivery acknowledgement timeout (`consumer_timeout`): 30 minutes, in ms. */
export const RABBITMQ_DEFAULT_ACK_TIMEOUT_MS = 1_800_000;

/**
 * Options of an idempotent RabbitMQ consumer. Every field but `queue` has a default; see each
 * `@defaultValue`. Behaviour per claim outcome: DESIGN.md, "Outcome → broker action", RabbitMQ column.
 */
export interface IdempotentConsumerOptions {
  /** The work queue to consume from. It must exist (the consumer checks it, but does not declare it). */
  queue: string;
  /** Namespace of the idempotency keys (DESIGN.md, "Vocabulary"). @defaultValue the queue name */
  scope?: string;
  /**
   * Reads the idempotency key of a delivery; `undefined` means the delivery has none (see `missingKey`).
   * A extractor that throws is treated like an invalid key: the message is dead-lettered.
   * @defaultValue `properties.messageId`, else the `idempotency-key` header
   */
  idempotencyKey?: IdempotencyKeyExtractor;
  /**
   * What to do with a delivery without an idempotency key: `reject` dead-letters it (reason
   * `missing-key`); `process` runs the handler without idempotency (no claim, `fencingToken` 0, outcome
   * `UNPROTECTED`) and emits `missingKey`. Never silent. @defaultValue `'reject'`
   */
  missingKey?: 'reject' | 'process';
  /**
   * Whether the raw content bytes are fingerprinted (SHA-256), so that the same key with another payload
   * is a `PAYLOAD_MISMATCH` and is dead-lettered without running. @defaultValue true
   */
  fingerprintPayload?: boolean;
  /** Most unacked deliveries on the consume channel (`basic.qos`), handled concurrently. @defaultValue 10 */
  prefetch?: number;
  /**
   * TTLs of the delay tiers, in milliseconds: one queue per tier with `x-message-ttl` that dead-letters
   * back to the work queue. A wanted delay is rounded up to the next tier (bounded by the longest).
   * @defaultValue `[1000, 5000, 30000, 120000]`
   */
  delayTiersMs?: readonly number[];
  /**
   * Delay before retrying a handler error, by the record's attempt number (`computeBackoffMs` of core),
   * then rounded up to a delay tier. @defaultValue `{ baseMs: 1000, factor: 2, maxMs: 120000, jitter: 'full' }`
   */
  retryBackoff?: BackoffOptions;
  /** Name prefix of the delay-tier queues; a tier is `<prefix>.<ms>ms`. @defaultValue `<queue>.delay` */
  delayQueuePrefix?: string;
  /**
   * The exchange dead-lettered messages are published to, with the work queue's name as routing key.
   * @defaultValue `<queue>.dlx` (a durable `direct` exchange)
   */
  deadLetterExchange?: string;
  /**
   * The queue bound to the dead-letter exchange with the work queue's name as binding key; `false` when
   * you bind your own (a dead-letter publish that routes nowhere is refused as a `TopologyMismatchError`).
   * @defaultValue `<queue>.dlq`
   */
  deadLetterQueue?: string | false;
  /**
   * `assert` declares the delay tiers, the dead-letter exchange and queue (RabbitMQ refuses a declaration
   * whose arguments differ from an existing resource: `TopologyMismatchError`); `check` only checks that
   * they exist (passive declare). @defaultValue `'assert'`
   */
  topology?: 'assert' | 'check';
  /** Overrides the runner's `leaseMs` for this consumer, in milliseconds. */
  leaseMs?: number;
  /** Overrides the runner's `maxAttempts` for this consumer. */
  maxAttempts?: number;
  /**
   * The broker's delivery acknowledgement timeout (`consumer_timeout`), in milliseconds. `leaseMs` must
   * be below it. A handler that runs longer than it has its channel closed by RabbitMQ.
   * @defaultValue 1800000 (RabbitMQ's default, 30 min)
   */
  brokerAckTimeoutMs?: number;
  /**
   * Delay between store probes while consumption is paused because the store is unavailable.
   * @defaultValue `{ baseMs: 250, factor: 2, maxMs: 5000, jitter: 'full' }`
   */
  storeProbeBackoff?: BackoffOptions;
  /** Consumer tag to register with (`basic.consume`); RabbitMQ generates one when omitted. */
  consumerTag?: string;
}

/** {@link IdempotentConsumerOptions} with every default applied. */
export interface ResolvedConsumerOptions {
  readonly queue: string;
  readonly scope: string;
  readonly idempotencyKey: IdempotencyKeyExtractor;
  readonly missingKey: 'reject' | 'process';
  readonly fingerprintPayload: boolean;
  readonly prefetch: number;
  readonly delayTiersMs: readonly number[];
  readonly retryBackoff: BackoffOptions;
  readonly delayQueuePrefix: string;
  readonly deadLetterExchange: string;
  readonly deadLetterQueue: string | false;
  readonly topology: 'assert' | 'check';
  readonly leaseMs: number | undefined;
  readonly maxAttempts: number | undefined;
  readonly brokerAckTimeoutMs: number;
  readonly storeProbeBackoff: BackoffOptions;
  readonly consumerTag: string | undefined;
}

function positiveInt(name: string, value: number | undefined): void {
  if (value !== undefined && !(Number.isSafeInteger(value) && value > 0)) {
    throw new InvalidOptionError(`${name} must be an integer > 0, got ${String(value)}`);
  }
}

function nonEmpty(name: string, value: unknown): void {
  if (typeof value !== 'string' || value.length === 0 || Buffer.byteLength(value) > 255) {
    throw new InvalidOptionError(`${name} must be a non-empty string of at most 255 bytes`);
  }
}

/**
 * Applies defaults and checks ranges.
 * @param runnerLeaseMs - the runner's `leaseMs`, used when `options.leaseMs` is not set.
 * @throws InvalidOptionError when an option is out of range, or the lease is not below the broker's
 *   acknowledgement timeout.
 */
export function resolveConsumerOptions(
  options: IdempotentConsumerOptions,
  runnerLeaseMs: number,
): ResolvedConsumerOptions {
  if (!options || typeof options !== 'object') throw new InvalidOptionError('options are required');
  nonEmpty('queue', options.queue);
  const queue = options.queue;
  const tiers = [...(options.delayTiersMs ?? [1000, 5000, 30_000, 120_000])].sort((a, b) => a - b);
  if (tiers.length === 0) throw new InvalidOptionError('delayTiersMs needs at least one tier');
  for (const t of tiers) positiveInt('delayTiersMs[]', t);
  if (new Set(tiers).size !== tiers.length) throw new InvalidOptionError('delayTiersMs has duplicates');
  positiveInt('prefetch', options.prefetch);
  positiveInt('leaseMs', options.leaseMs);
  positiveInt('maxAttempts', options.maxAttempts);
  positiveInt('brokerAckTimeoutMs', options.brokerAckTimeoutMs);
  const missingKey = options.missingKey ?? 'reject';
  if (missingKey !== 'reject' && missingKey !== 'process') {
    throw new InvalidOptionError(`missingKey must be 'reject' or 'process', got ${String(missingKey)}`);
  }
  const topology = options.topology ?? 'assert';
  if (topology !== 'assert' && topology !== 'check') {
    throw new InvalidOptionError(`topology must be 'assert' or 'check', got ${String(topology)}`);
  }
  const brokerAckTimeoutMs = options.brokerAckTimeoutMs ?? RABBITMQ_DEFAULT_ACK_TIMEOUT_MS;
  const leaseMs = options.leaseMs ?? runnerLeaseMs;
  if (leaseMs >= brokerAckTimeoutMs) {
    throw new InvalidOptionError(
      `leaseMs (${leaseMs}) must be below the broker's acknowledgement timeout (${brokerAckTimeoutMs} ms)`,
    );
  }
  const resolved: ResolvedConsumerOptions = {
    queue,
    scope: options.scope ?? queue,
    idempotencyKey: options.idempotencyKey ?? defaultIdempotencyKey,
    missingKey,
    fingerprintPayload: options.fingerprintPayload ?? true,
    prefetch: options.prefetch ?? 10,
    delayTiersMs: tiers,
    retryBackoff: options.retryBackoff ?? { baseMs: 1000, factor: 2, maxMs: 120_000, jitter: 'full' },
    delayQueuePrefix: options.delayQueuePrefix ?? `${queue}.delay`,
    deadLetterExchange: options.deadLetterExchange ?? `${queue}.dlx`,
    deadLetterQueue: options.deadLetterQueue ?? `${queue}.dlq`,
    topology,
    leaseMs: options.leaseMs,
    maxAttempts: options.maxAttempts,
    brokerAckTimeoutMs,
    storeProbeBackoff: options.storeProbeBackoff ?? { baseMs: 250, factor: 2, maxMs: 5000, jitter: 'full' },
    consumerTag: options.consumerTag,
  };
  nonEmpty('scope', resolved.scope);
  nonEmpty('delayQueuePrefix', resolved.delayQueuePrefix);
  nonEmpty('deadLetterExchange', resolved.deadLetterExchange);
  if (resolved.deadLetterQueue !== false) nonEmpty('deadLetterQueue', resolved.deadLetterQueue);
  if (typeof resolved.idempotencyKey !== 'function') {
    throw new InvalidOptionError('idempotencyKey must be a function');
  }
  return resolved;
}
