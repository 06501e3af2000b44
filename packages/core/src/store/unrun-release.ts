import type { AcquiredReply, ReleaseOptions } from './idempotency-store';

/**
 * The {@link ReleaseOptions} that give back a claim whose handler never ran (`Idempotency.release`, a
 * batch's reservations left when it stops): `neverStarted`, so a counted claim returns its attempt, and
 * `abandoned` when the claim was `ACQUIRED_STALE`, so the record stays stale for the next claim (the handler
 * whose lease lapsed may have left partial effects). docs/design.md#the-record-and-its-states, "Attempts".
 * @param retentionMs - TTL of the released record, in milliseconds (an integer > 0).
 */
export function unrunReleaseOptions(claim: AcquiredReply, retentionMs: number): ReleaseOptions {
  return { retentionMs, abandoned: claim.outcome === 'ACQUIRED_STALE', neverStarted: true };
}
