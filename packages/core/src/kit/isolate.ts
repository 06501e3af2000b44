/**
 * Calls `report` (a user's callback or listener) and drops whatever it throws: a reporting bug must not
 * change what the caller does next (keep a gate closed, let leases lapse, turn an ack into a redelivery).
 * @internal
 */
export function callIsolated(report: () => void): void {
  try {
    report();
  } catch {
    // Isolated by design; see above.
  }
}
