/**
 * The delay tier a wanted delay goes to: the smallest tier at least as long as `delayMs`, or the longest
 * tier when every tier is shorter (so delays are bounded by the longest tier). Rounding up means a message
 * delayed for a handler error comes back after its backoff, not before. With `capMs`, only the tiers not
 * longer than the cap are candidates (the smallest tier when every tier is longer), so a CONFLICT's
 * redelivery follows `maxConflictDelayMs` rather than the holder's whole remaining lease.
 *
 * @param tiersMs - the tiers' TTLs in milliseconds, sorted ascending, at least one.
 * @param delayMs - the wanted delay in milliseconds.
 * @param capMs - the longest delay wanted, in milliseconds. @defaultValue no cap
 */
export function pickDelayTier(
  tiersMs: readonly number[],
  delayMs: number,
  capMs = Number.POSITIVE_INFINITY,
): number {
  const within = tiersMs.filter((tier) => tier <= capMs);
  const candidates = within.length > 0 ? within : tiersMs.slice(0, 1);
  for (const tier of candidates) if (tier >= delayMs) return tier;
  return candidates[candidates.length - 1]!;
}
