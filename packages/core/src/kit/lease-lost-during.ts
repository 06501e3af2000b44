import type { LeaseLostResult } from '../runner/run-result';

/** Why a claim was lost, as an adapter's `leaseLost` event says: its record vanished, or another claim took it. */
export type LeaseLostReason = 'record-vanished' | 'taken-over' | 'unknown';

/** What every adapter's `leaseLost` event carries beside its message subject. */
export interface LeaseLostFields {
  /** Where the claim was lost first: see {@link leaseLostDuring}. */
  readonly during: AdapterLeaseLostDuring;
  /** Whether the handler returned before the loss was seen. */
  readonly handlerCompleted: boolean;
  /** The token of the claim that was lost. */
  readonly fencingToken: number;
  /** Whether the record vanished or another claim took it (`unknown` when reading it failed). */
  readonly reason: LeaseLostReason;
}

/**
 * Where an adapter's `leaseLost` event says the claim was lost (its `during`), the same in every adapter;
 * see {@link leaseLostDuring}.
 */
export type AdapterLeaseLostDuring = 'start' | 'heartbeat' | 'write';

/**
 * The `during` of an adapter's `leaseLost` event for a run that ended `lease-lost`, the same in every
 * adapter: where the claim was lost first ({@link LeaseLostResult.during}), `local-deadline` told as
 * `heartbeat` (both are a loss while the handler ran, its signal aborted):
 *
 * - `start`: before the handler started (a reservation's start, or the extension before it, refused);
 *   nothing ran;
 * - `heartbeat`: while the handler ran (an extension was refused, or none reached the store for a whole
 *   lease), whether the handler then returned or threw;
 * - `write`: the lease held while the handler ran, and the write of its outcome (`complete`, `release`,
 *   `fail`) was refused, whether the handler returned or threw.
 *
 * Not from `handlerCompleted`: a handler that threw may have lost its claim at the write (its release
 * refused), and one that returned may have lost it while it ran.
 */
export function leaseLostDuring(result: Pick<LeaseLostResult<unknown>, 'during'>): AdapterLeaseLostDuring {
  return result.during === 'local-deadline' ? 'heartbeat' : result.during;
}
