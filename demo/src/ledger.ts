import type { Redis } from 'ioredis';

/**
 * The demo's "payment provider": every charge is one `HINCRBY` on a per-run hash, so the table can count
 * charges recorded, double charges and lost payments exactly.
 */
export function ledgerKey(runId: string): string {
  return `demo:${runId}:charges`;
}

/** Records one charge of a payment. */
export async function recordCharge(redis: Redis, runId: string, paymentId: string): Promise<void> {
  await redis.hincrby(ledgerKey(runId), paymentId, 1);
}

/** What the ledger says after a run. */
export interface LedgerTotals {
  /** Every charge made, counting double charges. */
  readonly chargesRecorded: number;
  /** Payments charged at least once. */
  readonly paymentsCharged: number;
  /** Charges beyond the first of each payment. */
  readonly doubleCharges: number;
}

/** Reads the ledger's totals. */
export async function readLedger(redis: Redis, runId: string): Promise<LedgerTotals> {
  const counts = Object.values(await redis.hgetall(ledgerKey(runId))).map(Number);
  const chargesRecorded = counts.reduce((a, b) => a + b, 0);
  return {
    chargesRecorded,
    paymentsCharged: counts.length,
    doubleCharges: counts.reduce((a, c) => a + Math.max(0, c - 1), 0),
  };
}

/** How many payments have been charged so far (cheap, for progress). */
export function countCharged(redis: Redis, runId: string): Promise<number> {
  return redis.hlen(ledgerKey(runId));
}
