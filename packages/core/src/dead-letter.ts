import { PayloadMismatchError } from './errors';
import { describeError } from './runner/idempotency';
import type { RunResult } from './runner/run-result';
import type { ClaimReply } from './store/idempotency-store';

/**
 * Why a message was dead-lettered, one vocabulary for every adapter. It is written in the
 * `DEAD_LETTER_FIELDS.reason` field of `@idempotent-consumer/core/kit`, whether the dead letter went to a
 * Kafka topic, a RabbitMQ exchange or an SQS queue.
 * - `attempts-exhausted`. The handler threw a retryable error on the last attempt `maxAttempts` allows, and
 *   the record is FAILED, see docs/design.md#failure-policy.
 * - `non-retryable`. The handler threw an error that `isRetryable` refused, such as `NonRetryableError`, and
 *   the record is FAILED.
 * - `result-too-large`. The handler returned a result above the stored-result size cap under the `fail`
 *   policy, and the record is FAILED.
 * - `payload-mismatch`. The claim answered PAYLOAD_MISMATCH because the key was first used with another
 *   payload, a producer bug. The handler did not run.
 * - `failed-record`. The claim answered FAILED because the record failed in an earlier delivery. The handler
 *   did not run.
 * - `missing-key`. The message carries no idempotency key and the adapter's missing-key policy rejects it.
 * - `invalid-key`. The key extractor threw, or the key was refused with `INVALID_IDEMPOTENCY_KEY`.
 */
export type DeadLetterReason =
  | 'attempts-exhausted'
  | 'non-retryable'
  | 'result-too-large'
  | 'payload-mismatch'
  | 'failed-record'
  | 'missing-key'
  | 'invalid-key';

/**
 * An adapter's decision to dead-letter a delivery, one shape for the adapters that mark the record, Kafka and
 * RabbitMQ. The adapter sends a copy carrying the {@link DEAD_LETTER_FIELDS} to the dead-letter destination.
 * Once that copy is durably sent, it marks the FAILED record dead-lettered with
 * `IdempotencyStore.markDeadLettered`, so later deliveries of the key are not dead-lettered again.
 */
export interface DeadLetterDecision {
  readonly action: 'dead-letter';
  readonly reason: DeadLetterReason;
  /** The record's attempt count, 0 when no claim was made. */
  readonly attempt: number;
  /** The error as `Name [CODE]: message`, from the runner's `describeError`. */
  readonly error: string;
  /** The FAILED record's fencing token, to mark it once the copy is sent. `undefined` when there is none. */
  readonly failedFencingToken: number | undefined;
}

/**
 * Names of the fields every adapter writes on a dead letter, as Kafka record headers, RabbitMQ message
 * headers and SQS message attributes alike, so one piece of code reads the dead letters of every broker.
 * Values are text, except that RabbitMQ writes `attempt` as a number header, so read it with `Number(value)`.
 * Adapters add broker-specific fields of their own, such as the original queue, topic, partition, offset or
 * message id.
 */
export const DEAD_LETTER_FIELDS = {
  /** Why the message was dead-lettered, a {@link DeadLetterReason}. */
  reason: 'x-idempotency-dead-letter-reason',
  /**
   * The claim outcome of the delivery that dead-lettered it, such as `ACQUIRED`, `PAYLOAD_MISMATCH` or
   * `UNPROTECTED`. `NO_CLAIM_OUTCOME`, that is `NONE`, when no claim was made, for `missing-key` and
   * `invalid-key`.
   */
  outcome: 'x-idempotency-outcome',
  /** The error as `Name [CODE]: message`, at most 1000 characters, from the runner's `describeError`. */
  error: 'x-idempotency-error',
  /** The idempotency record's attempt count in decimal, 1 for the first attempt and 0 without a claim. */
  attempt: 'x-idempotency-attempt',
  /** The idempotency key, when the message had one. */
  key: 'x-idempotency-key',
  /** The idempotency scope of the consumer, see docs/design.md#record-keys. */
  scope: 'x-idempotency-scope',
} as const;

/** The `DEAD_LETTER_FIELDS.outcome` value of a dead letter whose delivery made no claim. */
export const NO_CLAIM_OUTCOME = 'NONE';

/**
 * Derives why a result is dead-lettered, from the runner's {@link RunResult} or from a store's
 * {@link ClaimReply} for adapters that claim and execute apart. See docs/design.md#outcome-to-broker-action.
 * - A `failed` execution, whose record is FAILED now, gives its `reason`.
 * - PAYLOAD_MISMATCH gives `payload-mismatch`.
 * - FAILED, because an earlier attempt failed the record, gives `failed-record`.
 *
 * @returns `undefined` for every other result. That is completed, released, lease lost, DUPLICATE, CONFLICT,
 *   an ACQUIRED claim reply not yet executed, and UNPROTECTED runs. For those the store did not answer, so no
 *   record decides, and an adapter that dead-letters them counts attempts itself. `missing-key` and
 *   `invalid-key` are never derived, since no claim was made.
 */
export function deadLetterReasonOf(result: RunResult<unknown> | ClaimReply): DeadLetterReason | undefined {
  switch (result.outcome) {
    case 'PAYLOAD_MISMATCH':
      return 'payload-mismatch';
    case 'FAILED':
      return 'failed-record';
    case 'ACQUIRED':
    case 'ACQUIRED_STALE':
      return 'status' in result && result.status === 'failed' ? result.reason : undefined;
    default:
      return undefined;
  }
}

/**
 * The dead-letter decision of a result the core classifies as dead-lettered by {@link deadLetterReasonOf}. It
 * is the same for every adapter, so a dead letter carries the same `DEAD_LETTER_FIELDS.error` whichever
 * broker it went to.
 * - A `failed` execution gives its reason and the handler's error as `Name [CODE]: message`. It carries the
 *   record's token to mark when the FAILED write was recorded.
 * - FAILED, because an earlier delivery failed the record, gives `failed-record`, the record's stored error
 *   and its token.
 * - PAYLOAD_MISMATCH gives `payload-mismatch` and a `PayloadMismatchError [PAYLOAD_MISMATCH]: …` naming the
 *   record's state. There is nothing to mark, since the record belongs to the other payload.
 * @returns `undefined` for every other result, and for a FAILED record already marked dead-lettered. An
 *   earlier delivery sent its copy, so the adapter settles it without another.
 */
export function deadLetterOf(result: RunResult<unknown>): DeadLetterDecision | undefined {
  switch (result.outcome) {
    case 'PAYLOAD_MISMATCH': {
      const error = new PayloadMismatchError(
        `the idempotency key was first used with another payload (record ${result.state})`,
      );
      return letter('payload-mismatch', result.attempt, describeError(error), undefined);
    }
    case 'FAILED':
      if (result.deadLettered) return undefined;
      return letter('failed-record', result.attempt, result.error, result.fencingToken);
    case 'ACQUIRED':
    case 'ACQUIRED_STALE':
      if (result.status !== 'failed') return undefined;
      return letter(
        result.reason,
        result.attempt,
        describeError(result.error),
        result.recorded ? result.fencingToken : undefined,
      );
    default:
      return undefined;
  }
}

function letter(
  reason: DeadLetterReason,
  attempt: number,
  error: string,
  failedFencingToken: number | undefined,
): DeadLetterDecision {
  return { action: 'dead-letter', reason, attempt, error, failedFencingToken };
}

/**
 * The dead letter of an UNPROTECTED run that threw. The store did not answer and the runner failed open, or a
 * message without a key was processed. No record counts its attempts, so the adapter counts them from the
 * broker, such as RabbitMQ's retry header or SQS's receive count. It dead-letters with `attempts-exhausted`
 * once `attempt` reaches `maxAttempts`, or at once with `non-retryable` when `isRetryable` says no. There is
 * no record to mark, so `failedFencingToken` is `undefined`.
 * @returns `undefined` when the run should be retried.
 */
export function unprotectedDeadLetter(
  error: unknown,
  attempt: number,
  policy: { readonly maxAttempts: number; readonly isRetryable: (error: unknown) => boolean },
): DeadLetterDecision | undefined {
  const retryable = policy.isRetryable(error);
  if (retryable && attempt < policy.maxAttempts) return undefined;
  return letter(retryable ? 'attempts-exhausted' : 'non-retryable', attempt, describeError(error), undefined);
}
