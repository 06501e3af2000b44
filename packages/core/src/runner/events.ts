import type { ClaimOutcome } from '../store/idempotency-store';
import type { LeaseLostDuring } from './run-result';

/** Identifies the operation an event is about. */
export interface EventSubject {
  readonly scope: string;
  readonly key: string;
}

/**
 * Events an {@link Idempotency} runner emits, by name, with their payloads. Listen with `on(name, fn)` to log
 * or count them. A listener that throws is isolated and does not change the outcome.
 */
export interface IdempotencyEvents {
  /** Every claim, with its outcome. */
  outcome: [EventSubject & { outcome: ClaimOutcome; attempt: number; fencingToken: number }];
  /** A handler returned and its record was completed. `durationMs` is the handler's run time. */
  completed: [
    EventSubject & { attempt: number; fencingToken: number; durationMs: number; recorded: boolean },
  ];
  /** A handler threw a retryable error and the record was released. */
  released: [EventSubject & { attempt: number; fencingToken: number; error: unknown; recorded: boolean }];
  /** A handler's record became FAILED. */
  failed: [
    EventSubject & {
      attempt: number;
      fencingToken: number;
      error: unknown;
      reason: string;
      recorded: boolean;
    },
  ];
  /**
   * The claim was lost, at the start of a reservation, while the handler ran or at its final write, see
   * {@link LeaseLostDuring}. A loss while the handler ran is followed by a second event saying `write` when
   * the write after it is refused too.
   */
  leaseLost: [EventSubject & { fencingToken: number; during: LeaseLostDuring }];
  /**
   * A store call failed, and it may be retried. Not emitted when the store refused the caller's own request
   * with `InvalidKeyError`, `InvalidOptionError` or `InvalidPayloadError`. The call then rejects with that
   * error, as when the runner finds it before the store is touched.
   */
  storeError: [{ operation: string; error: unknown; subject?: EventSubject }];
  /**
   * Only with `storeFailureMode: 'open'`. A handler ran without protection because the store did not answer
   * its claim. Never during a `conflictWaitMs` wait, which runs nothing.
   */
  failOpen: [EventSubject & { error: unknown }];
  /** A result above `maxResultBytes` was not stored under `onResultTooLarge: 'omit'`. */
  resultOmitted: [EventSubject & { bytes: number; maxResultBytes: number }];
}
