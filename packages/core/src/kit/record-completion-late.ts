import type { RecordId } from '../keys';
import type { Idempotency } from '../runner/idempotency';
import type { CompletedResult, RunResult } from '../runner/run-result';
import { tryUntilAnswered } from './retry-when-open';
import type { StoreGate } from './store-gate';

/** Options of {@link recordCompletionLate}. */
export interface RecordCompletionLateOptions {
  /**
   * The consumer's {@link StoreGate}. A write the store does not answer (`STORE_UNAVAILABLE`) is tried
   * again each time the gate opens (a ping answered), until one is answered; under the runner's
   * `storeFailureMode: 'closed'` (or with {@link RecordCompletionLateOptions.closeGate}) that failure closes
   * the gate (its probe loop starts, and the consumer pauses as for any store call it fails closed on).
   * Without a gate, or when it stays open, there is one try and the record stays IN_PROGRESS until its
   * lease lapses.
   * @defaultValue none
   */
  readonly gate?: StoreGate;
  /**
   * Whether a try the store does not answer closes the gate, so the write is tried again when it opens:
   * `'always'` for an adapter that pauses for an unwritten completion whatever `storeFailureMode` (the
   * Kafka wrappers, whose offset waits for it; the SQS processor, which pauses polling for it), `'when
   * failing closed'` to follow the runner's `storeFailureMode`.
   * @defaultValue `'when failing closed'`
   */
  readonly closeGate?: 'always' | 'when failing closed';
  /**
   * The consumer's stop signal. Already aborted: nothing is tried. Aborted later: no further try (one under
   * way still lands or fails); the record then stays IN_PROGRESS until its lease lapses. @defaultValue none
   */
  readonly signal?: AbortSignal;
  /** A try failed with `error` (called for each failed try; isolated: one that throws changes nothing). */
  readonly onStoreError?: (error: unknown) => void;
}

/**
 * Records the completion of a handler that returned when the runner could not (`status: 'completed'`,
 * `recorded: false`: the store stayed unavailable through the runner's `writeAttempts`), and keeps trying
 * while the store does not answer. Without it the record stays IN_PROGRESS until its lease lapses, and a
 * redelivery after that (an SQS message delivered again after its delete, a producer's second send, a
 * RabbitMQ redelivery after a channel loss) is `ACQUIRED_STALE` and runs the handler a second time, though
 * the store answered again well within the lease. The broker's ack or delete is the caller's and need not
 * wait for it (the handler completed).
 *
 * Each try is `Idempotency.completeClaim`: the runner's own write, with its result limits, fencing and
 * events (`completed` with `recorded: true` and the handler's run time, `run.durationMs`, however late the
 * write lands; `resultOmitted`, `failed` for a result too large under `onResultTooLarge: 'fail'`,
 * `leaseLost`; `storeError` for each failed try).
 *
 * - `signal` aborted or the gate disposed: nothing is tried; resolves at once.
 * - Gate open (or none): tried now; resolves once that try is answered or failed.
 * - Gate closed: resolves at once; tried when it opens.
 * - The store takes the write: done (the record is COMPLETED; a redelivery is a `DUPLICATE`).
 * - The store refuses it (`LEASE_LOST`: the lease lapsed and another claim took the key, or the record
 *   vanished): done; the runner answers it as a `lease-lost` run and emits `leaseLost` (`during: 'write'`).
 *   A try whose reply was lost after the store applied it is answered as written on the next (the record
 *   is COMPLETED under this claim's token).
 * - A try the store does not answer (`STORE_UNAVAILABLE`): reported through `onStoreError`, then tried
 *   again each time the gate opens (see {@link RecordCompletionLateOptions.gate}) in the background, until
 *   the store answers it, `signal` aborts or the gate is disposed.
 * - Any other error (a reply this version cannot read, a bug): reported through `onStoreError` and not
 *   retried (it would fail the same way); the record lapses with its lease.
 *
 * Never rejects. Generalised from the Kafka adapter's background write of a completion whose delivery
 * ended before its write landed; the RabbitMQ and SQS adapters use it for every unrecorded completion.
 *
 * @param idempotency - the runner (its `completeClaim`, and `options.storeFailureMode`).
 * @param id - the run's record.
 * @param run - what the runner resolved with: only a run `completed` with `recorded: false` (outcome
 *   `ACQUIRED` or `ACQUIRED_STALE`) is written; any other (recorded, another status, a duplicate, an
 *   unprotected run) is ignored, so an adapter may pass every run.
 */
export async function recordCompletionLate<T>(
  idempotency: Pick<Idempotency, 'completeClaim' | 'options'>,
  id: RecordId,
  run: RunResult<T>,
  options: RecordCompletionLateOptions = {},
): Promise<void> {
  const completed = unrecordedCompletion(run);
  if (completed === undefined || options.signal?.aborted || options.gate?.disposed) return;
  const failClosed = options.closeGate === 'always' || idempotency.options.storeFailureMode === 'closed';
  await tryUntilAnswered(failClosed, () => idempotency.completeClaim(id, completed), options);
}

/** `run` when it is a handler's completion the runner could not record, else `undefined`. */
function unrecordedCompletion<T>(run: RunResult<T>): CompletedResult<T> | undefined {
  if (run.outcome !== 'ACQUIRED' && run.outcome !== 'ACQUIRED_STALE') return undefined;
  return run.status === 'completed' && !run.recorded ? run : undefined;
}
