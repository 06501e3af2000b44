import type { WrittenClaim } from '../errors';
import type { AcquiredReply, ClaimReply, ReleaseOptions } from './idempotency-store';

/*
 * Giving back a claim whose handler never ran ("give back unrun"): one concept, made at three layers that
 * each add one thing, all with the options of `unrunReleaseOptions` (below):
 *
 * - the store's own, inside `RedisIdempotencyStore` (a claim it wrote and nobody will see: a replicated
 *   claim its replicas did not acknowledge, the claims of a failed `claimMany`): one `release` script call,
 *   no `WAIT`, no event, failure ignored (the claim lapses with its lease);
 * - the runner's `Idempotency.giveBack` (one try, a `storeError` event when it fails, rejects), which
 *   `run`, `claim` and `waitForOutcome` also use for a claim a failed call had written
 *   (`StoreUnavailableError.writtenClaim`);
 * - the kit's `giveBackUnrun` (adapters, `LeaseKeeperSet`): `Idempotency.giveBack`, tried again each time
 *   the consumer's store gate opens until the store answers it or the consumer stops.
 *
 * Not a give-back: a claim whose handler ran (even unprotected, `storeFailureMode: 'open'`) is released
 * abandoned without `neverStarted`: its attempt was spent.
 */

/**
 * The {@link ReleaseOptions} that give back a claim whose handler never ran (`Idempotency.giveBack`, a
 * batch's reservations left when it stops, the claims of a failed `claimMany`, a claim written by a call
 * that failed: `StoreUnavailableError.writtenClaim`): `neverStarted`, so a counted claim returns its
 * attempt, and `abandoned` unless the claim was `ACQUIRED`, so the record stays stale for the next claim
 * (the handler whose lease lapsed may have left partial effects; an outcome not known counts as stale).
 * docs/design.md#the-record-and-its-states, "Attempts".
 * @param claim - the claim reply, or `writtenClaim`: only its `outcome` is read.
 * @param retentionMs - TTL of the released record, in milliseconds (an integer > 0).
 */
export function unrunReleaseOptions(
  claim: { readonly outcome?: 'ACQUIRED' | 'ACQUIRED_STALE' },
  retentionMs: number,
): ReleaseOptions {
  return { retentionMs, abandoned: claim.outcome !== 'ACQUIRED', neverStarted: true };
}

/**
 * The claim to give back, if `claim` holds one: an `ACQUIRED`/`ACQUIRED_STALE` reply, or a
 * `StoreUnavailableError.writtenClaim` (whose `outcome` may be `undefined`: a store that does not say;
 * {@link unrunReleaseOptions} takes it as stale). `undefined` for any other reply (it holds no key) and
 * for `undefined`. `claim` itself, not a copy.
 * @param claim - a claim reply, a `writtenClaim`, or `undefined` (no reply: the claim call failed).
 */
export function claimToGiveBack(
  claim: ClaimReply | WrittenClaim | undefined,
): AcquiredReply | WrittenClaim | undefined {
  if (claim === undefined) return undefined;
  if ('kind' in claim) return claim;
  return claim.outcome === 'ACQUIRED' || claim.outcome === 'ACQUIRED_STALE' ? claim : undefined;
}
