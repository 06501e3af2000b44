import {
  type BackoffOptions,
  InvalidOptionError,
  type Payload,
  type RunOverrides,
  type TelemetryOptions,
} from '@idempotent-consumer/core';
import { check } from '@idempotent-consumer/core/kit';
import type { ConsumeMessage } from 'amqplib';
import { defaultIdempotencyKey, type IdempotencyKeyExtractor } from './idempotency-key';
import { DEFAULT_DELAY_TIERS_MS } from './topology';

/** RabbitMQ's default consumer delivery acknowledgement timeout (`consumer_timeout`): 30 minutes, in ms. */
export const RABBITMQ_DEFAULT_ACK_TIMEOUT_MS = 1_800_000;

/**
 * Options of an idempotent RabbitMQ consumer. Every field but `queue` has a default; see each
 * `@defaultValue`. Behaviour per claim outcome: docs/design.md#outcome-to-broker-action, RabbitMQ column.
 */
export interface RabbitMqIdempotencyOptions extends RunOverrides {
  /** The work queue to consume from. It must exist (the consumer checks it, but does not declare it). */
  queue: string;
  /** Namespace of the idempotency keys (docs/design.md#vocabulary). @defaultValue the queue name */
  scope?: string;
  /**
   * Reads the idempotency key of a delivery; `undefined` means the delivery has none (see `missingKey`).
   * An extractor that throws is treated as an invalid key: the message is dead-lettered (`invalid-key`).
   * @defaultValue `properties.messageId`, else the `idempotency-key` header (`IDEMPOTENCY_KEY_HEADER`)
   */
  idempotencyKey?: IdempotencyKeyExtractor;
  /**
   * What to do with a delivery without an idempotency key: `dead-letter` it (reason `missing-key`), or
   * `process` it without idempotency (no claim; the handler sees outcome `UNPROTECTED`, `key` `''`,
   * `fencingToken` 0; retries bounded by `maxAttempts`, counted in a header). Either way a `missingKey`
   * event is emitted and, once per consumer, a console warning. @defaultValue `'dead-letter'`
   */
  missingKey?: 'dead-letter' | 'process';
  /**
   * The payload fingerprinted (SHA-256) with the key, so that the same key with another payload is a
   * `PAYLOAD_MISMATCH` and is dead-lettered without running: `true` for the raw content bytes, `false`
   * for no check, or a function choosing the payload (`undefined`: no check for that message), for
   * example the body without a field that differs between retries of one operation. @defaultValue true
   */
  fingerprint?: boolean | ((message: ConsumeMessage) => Payload | undefined);
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
  /**
   * The longest redelivery delay of a delivery still in CONFLICT after `conflictWaitMs`, in milliseconds:
   * it goes to the delay tier of `min(holder's remaining lease, maxConflictDelayMs)`, choosing among the
   * tiers not longer than this cap (the smallest tier when all are longer), instead of waiting out the
   * holder's whole lease. @defaultValue 5000
   */
  maxConflictDelayMs?: number;
  /**
   * How long a delivery that meets CONFLICT (another worker holds the key) waits for the holder's outcome,
   * in milliseconds, before it is redelivered (the runner's bounded wait, `Idempotency.waitForOutcome`):
   * the holder's complete answers DUPLICATE (ack) within milliseconds, its failure FAILED (dead-letter),
   * its release lets this delivery run. The delivery holds its prefetch slot meanwhile. 0: no wait.
   * @defaultValue 5000
   */
  readonly conflictWaitMs?: number;
  /**
   * The broker's delivery acknowledgement timeout (`consumer_timeout`), in milliseconds. `leaseMs` must
   * be below it. A handler that runs longer than it has its channel closed by RabbitMQ.
   * @defaultValue 1800000 (RabbitMQ's default, 30 min)
   */
  brokerAckTimeoutMs?: number;
  /**
   * Delay between store probes (`store.ping()`) while consumption is paused because the store did not
   * answer a claim, in milliseconds by probe number. @defaultValue `{ baseMs: 250, factor: 2, maxMs: 5000, jitter: 'full' }`
   */
  storeProbeBackoff?: BackoffOptions;
  /**
   * Delay between attempts to consume again after the consume channel or the connection closed, in
   * milliseconds by attempt number (each attempt: a new connection from `connect` when the connection
   * closed, the topology, the channels, `basic.consume`). Attempts go on until `stop()`.
   * @defaultValue `{ baseMs: 500, factor: 2, maxMs: 30000, jitter: 'full' }`
   */
  reconnectBackoff?: BackoffOptions;
  /**
   * How long `stop()` waits for the deliveries in flight (their handlers, outcome writes, republishes and
   * publisher confirms, acks; with the `basic.cancel`), in milliseconds. Deliveries still in flight then
   * are abandoned: their handlers' `signal` aborts, and nothing more is sent for them (no ack, no nack, no
   * copy to a delay tier or the dead-letter exchange, not even once a late confirm arrives), so they stay
   * unacked and the broker redelivers them once their channel closes, where their record decides (a
   * handler that completed meanwhile makes them a `DUPLICATE`, a claim still held a `CONFLICT` until its
   * lease lapses). The channel and connection closes then get what is left of it, at least 1 s; a close
   * the broker does not answer (a connection blocked by a memory or disk alarm) is not waited for beyond
   * that, and the connection opened with `connect` is then ended with its socket. `stop()` then resolves
   * with the count abandoned. The same option, default and range (0 to 2^31-1) as the SQS poller's;
   * under Kubernetes keep it a few seconds below `terminationGracePeriodSeconds` (30 s by default).
   * @defaultValue 30000
   */
  readonly stopTimeoutMs?: number;
  /** Consumer tag to register with (`basic.consume`); RabbitMQ generates one when omitted. */
  consumerTag?: string;
  /**
   * OpenTelemetry: a span per delivery and the `idempotent-consumer` metrics (core README, "Telemetry"),
   * through the optional peer dependency `@opentelemetry/api` (without it, nothing). `false`: none.
   * @defaultValue the global tracer and meter providers of `@opentelemetry/api`
   */
  telemetry?: TelemetryOptions | false;
}

/** {@link RabbitMqIdempotencyOptions} with every default applied. */
export interface ResolvedConsumerOptions {
  readonly queue: string;
  readonly scope: string;
  readonly idempotencyKey: IdempotencyKeyExtractor;
  readonly missingKey: 'dead-letter' | 'process';
  /** The payload to fingerprint for a message, `undefined` for none. */
  readonly fingerprint: (message: ConsumeMessage) => Payload | undefined;
  readonly prefetch: number;
  readonly delayTiersMs: readonly number[];
  readonly retryBackoff: BackoffOptions;
  readonly delayQueuePrefix: string;
  readonly deadLetterExchange: string;
  readonly deadLetterQueue: string | false;
  readonly topology: 'assert' | 'check';
  readonly maxConflictDelayMs: number;
  /** The runner overrides to pass to every run (`conflictWaitMs` always set). */
  readonly runOverrides: RunOverrides & { readonly conflictWaitMs: number };
  readonly brokerAckTimeoutMs: number;
  readonly storeProbeBackoff: BackoffOptions;
  readonly reconnectBackoff: BackoffOptions;
  readonly stopTimeoutMs: number;
  readonly consumerTag: string | undefined;
  readonly telemetry: TelemetryOptions | false | undefined;
}

/** AMQP short strings (queue and exchange names) hold at most 255 bytes. */
const AMQP_NAME_BYTES = 255;

/** The raw content bytes: the default payload of `fingerprint`. */
const contentOf = (message: ConsumeMessage): Payload => message.content;
const noPayload = (): undefined => undefined;

/**
 * Applies defaults and checks ranges.
 * @param runnerLeaseMs - the runner's `leaseMs`, used when `options.leaseMs` is not set.
 * @throws InvalidOptionError when an option is out of range, or the lease is not below the broker's
 *   acknowledgement timeout.
 */
export function resolveConsumerOptions(
  options: RabbitMqIdempotencyOptions,
  runnerLeaseMs: number,
): ResolvedConsumerOptions {
  if (!options || typeof options !== 'object') throw new InvalidOptionError('options are required');
  const queue = check.nonEmptyString('queue', options.queue, undefined, AMQP_NAME_BYTES);
  const tiers = [...(options.delayTiersMs ?? DEFAULT_DELAY_TIERS_MS)].sort((a, b) => a - b);
  if (tiers.length === 0) throw new InvalidOptionError('delayTiersMs needs at least one tier');
  for (const t of tiers) check.positiveInteger('delayTiersMs[]', t);
  if (new Set(tiers).size !== tiers.length) throw new InvalidOptionError('delayTiersMs has duplicates');
  const { leaseMs, maxAttempts, handlerTimeoutMs } = check.runOverrides(options);
  const conflictWaitMs = check.conflictWaitMs(options.conflictWaitMs);
  const brokerAckTimeoutMs = check.positiveInteger(
    'brokerAckTimeoutMs',
    options.brokerAckTimeoutMs,
    RABBITMQ_DEFAULT_ACK_TIMEOUT_MS,
  );
  if ((leaseMs ?? runnerLeaseMs) >= brokerAckTimeoutMs) {
    throw new InvalidOptionError(
      `leaseMs (${leaseMs ?? runnerLeaseMs}) must be below the broker's acknowledgement timeout (${brokerAckTimeoutMs} ms)`,
    );
  }
  const fingerprint = options.fingerprint ?? true;
  if (typeof fingerprint !== 'boolean') check.function('fingerprint', fingerprint);
  const deadLetterQueue = options.deadLetterQueue ?? `${queue}.dlq`;
  if (deadLetterQueue !== false) {
    check.nonEmptyString('deadLetterQueue', deadLetterQueue, undefined, AMQP_NAME_BYTES);
  }
  return {
    queue,
    scope: check.nonEmptyString('scope', options.scope, queue),
    idempotencyKey: check.function('idempotencyKey', options.idempotencyKey, defaultIdempotencyKey),
    missingKey: check.oneOf('missingKey', options.missingKey, ['dead-letter', 'process'], 'dead-letter'),
    fingerprint: fingerprint === true ? contentOf : fingerprint === false ? noPayload : fingerprint,
    prefetch: check.positiveInteger('prefetch', options.prefetch, 10),
    delayTiersMs: tiers,
    retryBackoff: check.backoff('retryBackoff', options.retryBackoff, {
      baseMs: 1000,
      factor: 2,
      maxMs: 120_000,
      jitter: 'full',
    }),
    delayQueuePrefix: check.nonEmptyString(
      'delayQueuePrefix',
      options.delayQueuePrefix,
      `${queue}.delay`,
      AMQP_NAME_BYTES,
    ),
    deadLetterExchange: check.nonEmptyString(
      'deadLetterExchange',
      options.deadLetterExchange,
      `${queue}.dlx`,
      AMQP_NAME_BYTES,
    ),
    deadLetterQueue,
    topology: check.oneOf('topology', options.topology, ['assert', 'check'], 'assert'),
    maxConflictDelayMs: check.maxConflictDelayMs(options.maxConflictDelayMs),
    runOverrides: {
      conflictWaitMs,
      ...(leaseMs === undefined ? {} : { leaseMs }),
      ...(maxAttempts === undefined ? {} : { maxAttempts }),
      ...(handlerTimeoutMs === undefined ? {} : { handlerTimeoutMs }),
    },
    brokerAckTimeoutMs,
    storeProbeBackoff: check.storeProbeBackoff(options.storeProbeBackoff),
    reconnectBackoff: check.backoff('reconnectBackoff', options.reconnectBackoff, {
      baseMs: 500,
      factor: 2,
      maxMs: 30_000,
      jitter: 'full',
    }),
    stopTimeoutMs: check.stopTimeoutMs(options.stopTimeoutMs),
    consumerTag: options.consumerTag,
    telemetry: check.telemetry('telemetry', options.telemetry),
  };
}
