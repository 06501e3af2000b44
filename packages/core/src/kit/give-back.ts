import type { WrittenClaim } from '../errors';
import type { RecordId } from '../keys';
import type { Idempotency } from '../runner/idempotency';
import type { ClaimReply } from '../store/idempotency-store';
import { claimToGiveBack } from '../store/unrun-release';
import { tryUntilAnswered } from './retry-when-open';
import { isUnanswered, type StoreGate } from './store-gate';

/** Options of {@link giveBackUnrun}. */
export interface GiveBackOptions {
  /**
   * The consumer's {@link StoreGate}. A give-back the store does not answer (`STORE_UNAVAILABLE`) is tried
   * again each time the gate opens (a ping answered), until one is answered; under the runner's
   * `storeFailureMode: 'closed'` that failure closes the gate (its probe loop starts, the consumer pauses
   * as for any store call it fails closed on). Without a gate, or when it stays open (a runner that fails
   * open), there is one try and an unanswered claim lapses with its lease. @defaultValue none
   */
  readonly gate?: StoreGate;
  /** Ends the waits for the gate (the consumer stops): a claim not given back by then lapses with its lease. */
  readonly signal?: AbortSignal;
  /** A try failed with `error` (called for each failed try; isolated: one that throws changes nothing). */
  readonly onStoreError?: (error: unknown) => void;
}

/**
 * Gives back a claim whose handler never started (`Idempotency.giveBack`: the record is RELEASED, a counted
 * claim returns its attempt, a claim that was `ACQUIRED_STALE` leaves the record stale), and keeps trying
 * while the store does not answer, so an outage at that moment does not leave the claim to lapse with its
 * lease (one attempt spent on a handler that never ran, and the next claim `ACQUIRED_STALE`). Takes an
 * `ACQUIRED`/`ACQUIRED_STALE` reply, or the `StoreUnavailableError.writtenClaim` of a claim call whose own
 * give-back the store did not answer; any other reply, and `undefined`, is ignored.
 *
 * - Gate open (or none): tried now; resolves once that try is answered or failed.
 * - Gate closed: resolves at once; tried when it opens.
 * - A try the store does not answer: reported through `onStoreError`, then tried again each time the gate
 *   opens (see {@link GiveBackOptions.gate}) in the background, until the store answers it, `signal`
 *   aborts or the gate is disposed. Any other error is reported and not retried.
 *
 * Every try is fenced by the claim's token: a claim another worker took over since (its lease lapsed
 * meanwhile) is left alone (`release` resolves `false`), and a try whose reply was lost after Redis applied
 * it is refused the same way on the next. Never rejects. This is the retrying layer of the give-back (see
 * store/unrun-release.ts): each try is one `Idempotency.giveBack`, which also emits the runner's
 * `storeError` when it fails. Generalised from the Kafka adapter's give-back of a claim whose start the
 * store did not answer; the SQS adapter and `LeaseKeeperSet` use it too.
 *
 * @param idempotency - the runner (its `release`, and `options.storeFailureMode`).
 * @param id - the claim's record.
 * @param claim - the claim reply, or a `StoreUnavailableError.writtenClaim`.
 */
export async function giveBackUnrun(
  idempotency: Pick<Idempotency, 'giveBack' | 'options'>,
  id: RecordId,
  claim: ClaimReply | WrittenClaim | undefined,
  options: GiveBackOptions = {},
): Promise<void> {
  const held = claimToGiveBack(claim);
  if (held === undefined) return;
  const failClosed = idempotency.options.storeFailureMode === 'closed';
  await tryUntilAnswered(failClosed, () => idempotency.giveBack(id, held), options);
}

/**
 * The claim a store call that failed with `error` had written and still holds
 * (`StoreUnavailableError.writtenClaim`, from any copy of core: its give-back inside the runner went
 * unanswered too), to pass to {@link giveBackUnrun}; `undefined` for any other error, and for a
 * `StoreUnavailableError` that names none. Adapters call it where a claim, `run` (failing closed) or
 * `waitForOutcome` rejected: left alone, that claim held the key IN_PROGRESS until its lease lapsed, and the
 * message's next claim met it as a CONFLICT.
 * @param error - what the call rejected with (any value).
 */
export function writtenClaimOf(error: unknown): WrittenClaim | undefined {
  if (!isUnanswered(error)) return undefined;
  const written = (error as { readonly writtenClaim?: unknown }).writtenClaim;
  // Only the mark a StoreUnavailableError sets (`kind`) makes it a claim to give back.
  return typeof written === 'object' && written !== null && (written as WrittenClaim).kind === 'written-claim'
    ? (written as WrittenClaim)
    : undefined;
}
