import type { DeadLetterReason, IdempotencyError } from '@idempotent-consumer/core';
import type { LeaseLostFields, MessageSubjectOf } from '@idempotent-consumer/core/kit';
import type { CloseReason } from './close-reason';
import type { Decision, RetryReason } from './decide';

/** Where a delivery came from on the broker. */
export interface RabbitMqSource {
  /** The work queue. */
  readonly queue: string;
  /** The delivery tag on the consume channel. */
  readonly deliveryTag: number;
  /** Whether RabbitMQ flagged the delivery as redelivered (it was delivered before and not acked). */
  readonly redelivered: boolean;
}

/**
 * The subject of every per-message event, the same fields under the same name (`MessageSubject`) in every
 * adapter: `scope`, `key`, `outcome`, `attempt`, and the broker's `source` ({@link RabbitMqSource}).
 */
export type MessageSubject = MessageSubjectOf<RabbitMqSource>;

/** What a broker request that failed was doing. */
export type BrokerOperation = 'publish' | 'ack' | 'nack' | 'consume' | 'cancel' | 'connect';

/** State of an idempotent RabbitMQ consumer. */
export type ConsumerState =
  | 'idle'
  | 'starting'
  | 'running'
  | 'paused'
  | 'reconnecting'
  | 'stopping'
  | 'stopped'
  | 'closed';

/**
 * Events of an idempotent RabbitMQ consumer, by name, with their payloads: the same names for the same
 * happenings as the Kafka and SQS adapters. A listener that throws is isolated: it never changes what the
 * broker sees. There is no `error` event (nothing can crash the process through an unhandled `error`
 * event); failures come as the specific events below.
 */
export interface RabbitMqIdempotencyEvents {
  /** A delivery arrived (before its key is read). */
  delivery: [RabbitMqSource];
  /**
   * A delivery was settled with the decision taken: `ack`, `retry` (a confirmed copy in a delay tier,
   * then `ack`), `dead-letter` (a confirmed copy in the dead-letter exchange, then `ack`), `requeue`
   * (`nack` with requeue) or `leave` (`reason: 'abandoned'`: `stop()` gave up on it when `stopTimeoutMs`
   * ran out; nothing is sent, the broker redelivers it once its channel closes). Every delivery ends in
   * exactly one `settled`, or in a `brokerError` of its `ack`/`nack` (the channel closed: the broker
   * redelivers it). An abandoned delivery is reported as the SQS poller reports its abandoned messages:
   * once, before `stopped`, with `outcome` `undefined` and `attempt` 0; nothing later is reported for it.
   */
  settled: [MessageSubject & { decision: Decision }];
  /**
   * A copy went to a delay tier (confirmed): a CONFLICT, or a retryable handler error. `settled` follows,
   * unless the original's `ack` then fails (its channel closed: a `brokerError`); its redelivery is then
   * decided again (a retryable error runs the handler again), and each copy it makes is reported too.
   */
  retryScheduled: [
    MessageSubject & {
      reason: RetryReason;
      /** The delay tier, in milliseconds. */
      delayMs: number;
      /** The remaining lease or backoff before rounding up to a tier, in milliseconds. */
      wantedDelayMs: number;
      delayQueue: string;
      /** What the handler threw (`undefined` for a CONFLICT); the copy carries it described. */
      error: unknown;
    },
  ];
  /**
   * A copy went to the dead-letter exchange (confirmed), once per message. `settled` follows, unless the
   * original's `ack` then fails (its channel closed: a `brokerError`); its redelivery is then acked
   * (`dead-lettered-before`) without another copy when its record is FAILED, else copied and reported again.
   */
  deadLettered: [
    MessageSubject & {
      reason: DeadLetterReason;
      error: string;
      destination: { exchange: string; routingKey: string };
    },
  ];
  /** A delivery had no idempotency key: it is dead-lettered or processed without idempotency. */
  missingKey: [MessageSubject & { action: 'dead-letter' | 'process' }];
  /**
   * A delivery's key was refused (the extractor threw, or the store refused the key: `InvalidKeyError`)
   * or its payload could not be fingerprinted (`InvalidPayloadError`): it is dead-lettered as
   * `invalid-key`, whatever `missingKey` says.
   */
  invalidKey: [MessageSubject & { error: IdempotencyError }];
  /**
   * The store answered with an error that is not an outage (an unexpected reply: a bug or version skew):
   * the delivery is requeued after the shortest delay tier and consumption goes on (only a
   * `StoreUnavailableError` pauses it). Except an `UnreadableResultError` (code `UNREADABLE_RESULT`): the
   * key's record is COMPLETED but its stored result cannot be decoded by this version (a newer version
   * wrote it, during a rolling upgrade; or corrupt bytes): the delivery is acked as a DUPLICATE (`settled`
   * with `ack`/`duplicate`), and this event tells an operator of the version skew.
   */
  storeError: [{ queue: string; operation: string; error: unknown; source: RabbitMqSource | undefined }];
  /** The claim lost its lease (docs/design.md#leases): see `handlerCompleted` for what the handler did. */
  leaseLost: [MessageSubject & LeaseLostFields];
  /** The store did not answer a claim: consumption paused (`basic.cancel`) until a probe answers. */
  storeUnavailable: [{ queue: string; error: unknown }];
  /** The store answered a probe again and consumption resumed; `downMs` is how long it was paused. */
  storeRecovered: [{ queue: string; downMs: number }];
  /**
   * A broker request failed: a republish (broker nack, channel closed, unroutable), an `ack`/`nack` on a
   * closed channel, a `basic.consume`, or a reconnect attempt. `source` is set when it was about one delivery.
   */
  brokerError: [
    { queue: string; operation: BrokerOperation; error: unknown; source: RabbitMqSource | undefined },
  ];
  /** Consuming started (`basic.consume` answered). */
  started: [{ queue: string; consumerTag: string }];
  /**
   * `stop()` finished: the consumer's channels are closed (or, unanswered, left to the connection you
   * gave). `abandoned` deliveries were still in flight when `stopTimeoutMs` ran out: unacked, each
   * reported `settled` with `leave`/`abandoned` before this, the broker redelivers them.
   */
  stopped: [{ queue: string; abandoned: number }];
  /**
   * A channel the consumer opened closed without `stop()`. `error`: the channel's error, else the
   * connection's close error when the broker closed the connection (`undefined` when neither says
   * anything: the client closed it). `reason`: the broker's reply code and text read from that error
   * (`undefined` for a socket error or a client close). With a `connect` factory the consumer then
   * reconnects (`reconnected`); without one it is `closed` for good.
   */
  channelClosed: [
    { queue: string; channel: 'consume' | 'publish'; error: unknown; reason: CloseReason | undefined },
  ];
  /** After a lost connection or channel, the consumer consumes again on a new one; `attempts` tries it took. */
  reconnected: [{ queue: string; attempts: number; downMs: number }];
  /**
   * RabbitMQ cancelled the consumer (the queue was deleted, or a node failed), while running or paused for
   * a store outage (then the broker's `basic.cancel`, or the resume's `basic.consume` answered 404): the
   * consumer is `closed`, once.
   */
  cancelled: [{ queue: string }];
}

/** @internal How the consumer's parts report: emits one event, never throws. */
export type Emit = <K extends keyof RabbitMqIdempotencyEvents>(
  name: K,
  ...payload: RabbitMqIdempotencyEvents[K]
) => void;
