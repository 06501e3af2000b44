import type { ReleaseOptions } from './idempotency-store';

/**
 * The {@link ReleaseOptions} that give back a claim whose handler never ran (`Idempotency.release`, a
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
