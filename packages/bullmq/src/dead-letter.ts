import { DEAD_LETTER_FIELDS, type DeadLetterDecision, NO_CLAIM_OUTCOME } from '@idempotent-consumer/core/kit';
import { UnrecoverableError } from 'bullmq';
import type { MessageSubject } from './events';

/** The dead-letter fields of a failed job, by their `DEAD_LETTER_FIELDS` names, as text. */
export type DeadLetterFields = Readonly<Record<string, string>>;

/**
 * The error a dead-lettered job fails with. BullMQ fails it at once, whatever attempts are left, and
 * stores the message as the job's `failedReason`. The message is the core's `DEAD_LETTER_FIELDS` as one
 * JSON object, the names the other adapters write as headers. {@link readDeadLetter} reads them back.
 */
export function deadLetterError(decision: DeadLetterDecision, subject: MessageSubject): UnrecoverableError {
  const f = DEAD_LETTER_FIELDS;
  const fields: Record<string, string> = {
    [f.reason]: decision.reason,
    [f.outcome]: subject.outcome ?? NO_CLAIM_OUTCOME,
    [f.error]: decision.error,
    [f.attempt]: String(decision.attempt),
    [f.scope]: subject.scope,
  };
  if (subject.key !== undefined) fields[f.key] = subject.key;
  return new UnrecoverableError(JSON.stringify(fields));
}

/**
 * The dead-letter fields in a failed job's `failedReason`, or `undefined` when it did not fail as a dead
 * letter of this adapter.
 * @example
 * ```ts
 * const fields = readDeadLetter(job.failedReason);
 * if (fields) console.log(fields['x-idempotency-dead-letter-reason']);
 * ```
 */
export function readDeadLetter(failedReason: string | undefined): DeadLetterFields | undefined {
  if (!failedReason?.startsWith('{')) return undefined;
  try {
    const parsed: unknown = JSON.parse(failedReason);
    if (typeof parsed !== 'object' || parsed === null) return undefined;
    return DEAD_LETTER_FIELDS.reason in parsed ? (parsed as DeadLetterFields) : undefined;
  } catch {
    return undefined;
  }
}
