/**
 * The delay tier a wanted delay goes to: the smallest tier at least as long as `delayMs`, or the longest
 * tier when every tier is shorter (so delays are bounded by the longest tier). Rounding up means a message
 * delayed for a CONFLICT comes back after the holder's lease has ended, not before.
 *
 * @param tiersMs - the tiers' TTLs in milliseconds, sorted ascending, at least one.
 * @param delayMs - the wanted delay in milliseconds.
 */
export function pickDelayTier(tiersMs: readonly number[], delayMs: number): number {
  for (const tier of tiersMs) if (tier >= delayMs) return tier;
  return tiersMs[tiersMs.length - 1]!;
}
