import type { Redis } from 'ioredis';

/**
 * The demo's "payment provider": every charge is one `HINCRBY` on a per-run hash, so the table can count
 * charges recorded, double charges and lost payments exactly.
 */
export function ledgerKey(runId: string): string {
  return `demo:${runId}:charges`;
}

/** How long a run's ledger (and its victim marker) is kept in Redis, in seconds: runs do not pile up. */
export const LEDGER_TTL_SECONDS = 3600;

/** Records one charge of a payment (and keeps the ledger for {@link LEDGER_TTL_SECONDS}). */
export async function recordCharge(redis: Redis, runId: string, paymentId: string): Promise<void> {
  const key = ledgerKey(runId);
  const results = await redis.multi().hincrby(key, paymentId, 1).expire(key, LEDGER_TTL_SECONDS).exec();
  const error = results?.find(([e]) => e)?.[0];
  if (!results || error) throw error ?? new Error(`the ledger write of ${paymentId} was aborted`);
}

/**
 * Claims the role of the consumer killed mid-handler for one run: true for exactly one caller per run,
 * whichever process asks first.
 */
export async function claimVictim(redis: Redis, runId: string): Promise<boolean> {
  const set = await redis.set(`demo:${runId}:victim`, String(process.pid), 'EX', LEDGER_TTL_SECONDS, 'NX');
  return set === 'OK';
}

/** What the ledger says after a run. */
export interface LedgerTotals {
  /** Every charge made, counting double charges. */
  readonly chargesRecorded: number;
  /** Payments charged at least once. */
  readonly paymentsCharged: number;
  /** Charges beyond the first of each payment. */
  readonly doubleCharges: number;
  /** Payments charged more than once. */
  readonly doubleChargedPayments: number;
}

/** Reads the ledger's totals. */
export async function readLedger(redis: Redis, runId: string): Promise<LedgerTotals> {
  const counts = Object.values(await redis.hgetall(ledgerKey(runId))).map(Number);
  const chargesRecorded = counts.reduce((a, b) => a + b, 0);
  return {
    chargesRecorded,
    paymentsCharged: counts.length,
    doubleCharges: counts.reduce((a, c) => a + Math.max(0, c - 1), 0),
    doubleChargedPayments: counts.filter((c) => c > 1).length,
  };
}

/** How many payments have been charged so far (cheap, for progress). */
export function countCharged(redis: Redis, runId: string): Promise<number> {
  return redis.hlen(ledgerKey(runId));
}
