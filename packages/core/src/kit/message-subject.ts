import type { RunOutcome } from '../runner/run-result';

/**
 * What every per-message event of an adapter is about, the same fields in every adapter: the record
 * (`scope`, `key`), the claim (`outcome`, `attempt`) and where the message came from on the broker
 * (`source`, the adapter's own type). Each adapter exports it as `MessageSubject`, with its `Source`.
 * @typeParam Source - the broker's location of the message (queue and delivery tag, topic/partition/offset,
 *   queue URL and message id).
 */
export interface MessageSubjectOf<Source> {
  /** The record's scope (the consumer's `scope` option). */
  readonly scope: string;
  /** The idempotency key, `undefined` when the message carried none (or the extractor threw). */
  readonly key: string | undefined;
  /** The claim outcome, `UNPROTECTED` for a run without a claim, `undefined` when no claim was answered. */
  readonly outcome: RunOutcome | undefined;
  /** The record's attempt (1 for the first run; the broker's count for an unprotected run), 0 when no claim was made. */
  readonly attempt: number;
  /** Where the message came from on the broker. */
  readonly source: Source;
}
