import type { IdempotencyError } from '../errors';
import type { Payload } from '../fingerprint';
import type { MessageSpan } from '../kit/telemetry/message-span';
import type { RunRequest } from '../runner/idempotency';
import type { RunOutcome, RunResult } from '../runner/run-result';
import type { Decision, RetryReason } from './decide';

/** The record fields of a per-message event; the port adds where the message came from. */
export interface SubjectFields {
  readonly scope: string;
  /** `undefined` when the message carries no key, or its extractor threw. */
  readonly key: string | undefined;
  /** `undefined` when no claim was answered. */
  readonly outcome: RunOutcome | undefined;
  /** The record's attempt, the count of runs without a claim, or 0 without a claim. */
  readonly attempt: number;
}

/** A message with its record read: a run request, or why there is none. */
export type Prepared =
  | { readonly kind: 'keyed'; readonly request: RunRequest }
  | {
      readonly kind: 'unkeyed';
      readonly scope: string;
      readonly reason: 'missing-key' | 'invalid-key';
      readonly error: IdempotencyError;
    }
  /** The port's `scopeOf` threw: the message goes back to the broker (`leave`, `error`). */
  | { readonly kind: 'unscoped'; readonly error: unknown };

/** How the pipeline ended one message, for its port to carry out. */
export interface MessageEnd<T> {
  readonly decision: Decision;
  readonly subject: SubjectFields;
  /** The run's result, when a claim was answered or a handler ran. */
  readonly run?: RunResult<T>;
  /** What failed, when the message ended on an error rather than a result. */
  readonly error?: unknown;
  /** The message's telemetry, still open: the port records its broker action and ends it. */
  readonly span: MessageSpan;
  /**
   * Marks the FAILED record dead-lettered once its copy is durably sent, so a redelivery is settled
   * without another copy. Does nothing for a decision without a record to mark. Never rejects.
   */
  readonly markDeadLettered: () => Promise<void>;
}

/** The words of the consumer's warnings about one message, in the broker's terms. */
export interface WarningWords {
  /** Where the message came from: `on queue payments`. */
  readonly where: string;
  /** Where its key is read: `by default the idempotency-key header`. */
  readonly keySource: string;
  /** What a producer can do about a missing key, a full sentence or `''`. */
  readonly advice: string;
  /** What happens to the message when it is not acknowledged: `pay[0]@7 stays unresolved and is fetched again`. */
  readonly unacknowledged: string;
  /** What happens to a dead letter: `dead-lettered (reason missing-key) to payments.dlx`. */
  deadLetter(reason: 'missing-key' | 'invalid-key'): string;
}

/** The events the pipeline emits through its port, by name. */
export type PipelineEventName = 'missingKey' | 'invalidKey' | 'leaseLost' | 'storeError';

/** What a port's `carryOut` resolves with. */
export interface CarriedOut<R> {
  /**
   * Whether the broker will not deliver the message again as it came: acked, retried with its count
   * moved on, or dead-lettered. `false` when it will (requeued, left, a copy that failed).
   */
  readonly done: boolean;
  /** What the port's caller needs of it; `MessagePipeline.process` resolves with it. */
  readonly result: R;
}

/**
 * One broker, as the pipeline sees it: how to read a message, keep its delivery alive, and carry out a
 * decision. Each broker package implements one. Optional hooks do nothing when absent.
 * @typeParam M - the broker's message (a delivery, a job, a record).
 * @typeParam R - what carrying out a message gives the port's caller.
 */
export interface MessagePort<M, R = void> {
  /** The scope of the message's record. A throw ends the message as an `error` (`leave`). */
  scopeOf(message: M): string;
  /** The idempotency key; `undefined` or `''` when there is none. A throw is an `invalid-key`. */
  keyOf(message: M): string | undefined;
  /** The payload to fingerprint, `undefined` for none. A throw is an `invalid-key`. */
  payloadOf(message: M): Payload | undefined;
  /** What the broker adds to the handler's context: the message, its topic, … */
  handlerFields(message: M): object;
  /** The subject of a per-message event: `fields` and where the message came from. */
  subject(message: M, fields: SubjectFields): object;
  /** The payload of a `storeError` event about `message` (`undefined`: about none). */
  storeError(operation: string, error: unknown, message: M | undefined): object;
  /** The words of the warnings about `message`. */
  warningWords(message: M): WarningWords;
  /** Emits one of the port's events: `missingKey`, `invalidKey`, `leaseLost` or `storeError`. */
  emit(name: PipelineEventName, payload: object): void;
  /** What identifies the message across deliveries, to bound runs without a claim. */
  deliveryId(message: M): string | undefined;
  /** Runs without a claim the broker itself counted before this delivery. @defaultValue 0 */
  priorRuns?(message: M): number;
  /** Extends the broker's own timer with a lease renewed until `leaseLeftMs` from now. Not awaited. */
  extendTimer?(message: M, leaseLeftMs: number): void;
  /**
   * Keeps the delivery alive while the pipeline waits for `work` (a holder's outcome, the store), which may
   * take `expectedMs`. Resolves `false` when the delivery ended first; may reject with a broker failure,
   * which the pipeline passes on after giving back what it held. @defaultValue waits for `work`
   */
  keepAlive?(message: M, work: Promise<unknown>, expectedMs: number): Promise<boolean>;
  /** Runs before a claimed handler starts; `afterWait` when the claim came from a conflict wait. */
  beforeRun?(message: M, leaseMs: number, afterWait: boolean): Promise<void>;
  /** Whether a handler may start now. @defaultValue `run` */
  admission?(message: M): 'run' | 'stopping' | 'abandoned';
  /**
   * Waits `decision.delayMs` inline when the broker's contract allows it: `again` runs the message once
   * more, `stop` ends it. `undefined`: the port carries the retry out instead.
   */
  retryInline?(
    message: M,
    decision: { readonly reason: RetryReason; readonly delayMs: number; readonly error: unknown },
    subject: SubjectFields,
  ): Promise<'again' | 'stop'> | undefined;
  /**
   * Waits inline for a store that did not answer: `up` claims again, `down` and `stop` end the message.
   * @defaultValue `down`
   */
  waitForStore?(message: M, error: unknown): Promise<'up' | 'down' | 'stop'>;
  /**
   * Whether a completion the store did not take must be written before the message may be acked (a
   * Kafka offset commits every earlier one). Otherwise it is acked and the write is made later.
   */
  readonly completionBeforeAck?: boolean;
  /**
   * The error to pass on when `error`, thrown by `keepAlive` or `retryInline`, is a broker failure (a
   * rebalance); `undefined` for any other. `span` is the message's, still open.
   */
  brokerFailure?(error: unknown, span: MessageSpan): unknown;
  /** Carries out the end in the broker's terms (within the message's span). */
  carryOut(message: M, end: MessageEnd<unknown>): Promise<CarriedOut<R>>;
}
