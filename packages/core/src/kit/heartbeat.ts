/**
 * How often a claim's lease is extended while its handler runs, in milliseconds: a third of the lease,
 * so two extensions can fail (a slow store, a lost packet) before the lease runs out, and never more
 * than the configured interval: `min(maxIntervalMs, max(1, floor(leaseMs / 3)))`. The runner uses it for
 * every handler (with its `heartbeatIntervalMs`, so a per-call `leaseMs` shorter than the runner's still
 * gets three beats per lease); adapters use it for leases they keep themselves (a batch's claims waiting
 * their turn, see `LeaseKeeperSet`).
 *
 * @param leaseMs - the lease, in milliseconds (an integer >= 1).
 * @param maxIntervalMs - the configured interval, in milliseconds (the runner's `heartbeatIntervalMs`).
 *   @defaultValue no bound: a third of the lease
 * @returns an integer >= 1.
 */
export function heartbeatIntervalFor(leaseMs: number, maxIntervalMs = Number.POSITIVE_INFINITY): number {
  return Math.min(maxIntervalMs, Math.max(1, Math.floor(leaseMs / 3)));
}
