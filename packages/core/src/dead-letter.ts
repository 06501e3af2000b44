import { PayloadMismatchError } from './errors';
import { describeError } from './runner/idempotency';
import type { RunResult } from './runner/run-result';
import type { ClaimReply } from './store/idempotency-store';

/**
 * Why a message was dead-lettered: one vocabulary for every adapter (Kafka dead-letter topic, RabbitMQ
 * dead-letter exchange, SQS dead-letter queue), written in the `DEAD_LETTER_FIELDS.reason` field (`@idempotent-consumer/core/kit`).
 * - `attempts-exhausted`: the handler threw a retryable error on the last allowed attempt (`maxAttempts`);
 *   the record is FAILED (docs/design.md#failure-policy);
 * - `non-retryable`: the handler threw an error that `isRetryable` refused (e.g. `NonRetryableError`); the
 *   record is FAILED;
 * - `result-too-large`: the handler returned a result above the stored-result size cap with the `fail`
 *   policy; the record is FAILED;
 * - `payload-mismatch`: the claim answered PAYLOAD_MISMATCH (the key was first used with another payload,
 *   a producer bug); the handler did not run;
 * - `failed-record`: the claim answered FAILED (the record failed in an earlier delivery); the handler did
 *   not run;
 * - `missing-key`: the message carries no idempotency key and the adapter's missing-key policy rejects it;
 * - `invalid-key`: the key extractor threw, or the key was refused (`INVALID_IDEMPOTENCY_KEY`).
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
 * An adapter's decision to dead-letter a delivery, one shape for the adapters that mark the record
 * (Kafka, RabbitMQ): send a copy carrying the {@link DEAD_LETTER_FIELDS} to the dead-letter destination, and
 * once it is durably sent, mark the FAILED record dead-lettered (`IdempotencyStore.markDeadLettered`), so
 * later deliveries of the key are not dead-lettered again.
 */
export interface DeadLetterDecision {
  readonly action: 'dead-letter';
  readonly reason: DeadLetterReason;
  /** The record's attempt count (0 when no claim was made). */
  readonly attempt: number;
  /** The error as `Name [CODE]: message` (the runner's `describeError`). */
  readonly error: string;
  /** The FAILED record's fencing token, to mark it dead-lettered once the copy is sent; `undefined`: none to mark. */
  readonly failedFencingToken: number | undefined;
}

/**
 * Names of the fields every adapter writes on a dead letter: Kafka record headers, RabbitMQ message
 * headers and SQS message attributes alike, so one piece of code reads the dead letters of every broker.
 * Values are text (RabbitMQ writes `attempt` as a number header; read it with `Number(value)`). Adapters add
 * broker-specific fields of their own (original queue, topic, partition, offset, message id).
 */
export const DEAD_LETTER_FIELDS = {
  /** Why the message was dead-lettered: a {@link DeadLetterReason}. */
  reason: 'x-idempotency-dead-letter-reason',
  /**
   * The claim outcome of the delivery that dead-lettered it (`ACQUIRED`, `ACQUIRED_STALE`,
   * `PAYLOAD_MISMATCH`, `FAILED`, `UNPROTECTED`), or `NO_CLAIM_OUTCOME` (`NONE`) when no claim was made
   * (`missing-key`, `invalid-key`).
   */
  outcome: 'x-idempotency-outcome',
  /** The error as `Name [CODE]: message`, at most 1000 characters (the runner's `describeError`). */
  error: 'x-idempotency-error',
  /** The idempotency record's attempt count (1 for the first attempt; 0 when no claim was made), decimal. */
  attempt: 'x-idempotency-attempt',
  /** The idempotency key, when the message had one. */
  key: 'x-idempotency-key',
  /** The idempotency scope of the consumer (docs/design.md#record-keys). */
  scope: 'x-idempotency-scope',
} as const;

/** The `DEAD_LETTER_FIELDS.outcome` value of a dead letter whose delivery made no claim. */
export const NO_CLAIM_OUTCOME = 'NONE';

/**
 * Derives why a result is dead-lettered, from the runner's {@link RunResult} (or a store's
 * {@link ClaimReply}, for adapters that claim and execute apart). docs/design.md#outcome-to-broker-action:
 * - a `failed` execution (the record is FAILED now): its `reason`, `attempts-exhausted`, `non-retryable`
 *   or `result-too-large`;
 * - PAYLOAD_MISMATCH: `payload-mismatch`; FAILED (an earlier attempt failed the record): `failed-record`.
 *
 * @returns `undefined` for every other result: completed, released, lease lost, DUPLICATE, CONFLICT, an
 *   ACQUIRED claim reply not yet executed, and UNPROTECTED runs (the store did not answer, so no record
 *   decides; an adapter that dead-letters those counts attempts itself and picks `attempts-exhausted` or
 *   `non-retryable`). `missing-key` and `invalid-key` are never derived: no claim was made.
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
 * The dead-letter decision of a result the core classifies as dead-lettered ({@link deadLetterReasonOf}),
 * the same for every adapter, so a dead letter carries the same `DEAD_LETTER_FIELDS.error` whichever broker
 * it went to:
 * - a `failed` execution: its reason, the handler's error described (`Name [CODE]: message`), and the
 *   record's token to mark when the FAILED write was recorded;
 * - FAILED (an earlier delivery failed the record): `failed-record`, the record's stored error, its token;
 * - PAYLOAD_MISMATCH: `payload-mismatch`, a `PayloadMismatchError [PAYLOAD_MISMATCH]: …` naming the
 *   record's state, nothing to mark (the record belongs to the other payload).
 * @returns `undefined` for every other result, and for a FAILED record already marked dead-lettered (its
 *   copy was sent by an earlier delivery: the adapter settles it without another).
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
 * The dead letter of an UNPROTECTED run that threw (the store did not answer and the runner failed open,
 * or a message without a key was processed): no record counts its attempts, so the adapter counts them
 * from the broker (`attempt`, e.g. RabbitMQ's retry header or SQS's receive count) and dead-letters once
 * `attempt` reaches `maxAttempts` (`attempts-exhausted`) or at once when `isRetryable` says no
 * (`non-retryable`). No record to mark: `failedFencingToken` is `undefined`.
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
