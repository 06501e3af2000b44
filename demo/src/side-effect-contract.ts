import type { PaymentMessage } from './broker';
import type { LedgerTotals } from './ledger';

/**
 * Where the demo's charges go (`--side-effect`): `redis`, one `HINCRBY` per charge (ledger.ts), or
 * `postgres`, one ledger row per charge written in a PostgreSQL transaction; in `sdk` mode that transaction
 * goes through the transactional inbox of `@idempotent-consumer/inbox-sql` (postgres-ledger.ts).
 */
export const SIDE_EFFECTS = ['redis', 'postgres'] as const;
export type SideEffectKind = (typeof SIDE_EFFECTS)[number];

/** The consumer side: records one charge of a payment. */
export interface ChargeWriter {
  /**
   * Charges once. `fencingToken` is the claim's token in `sdk` mode (undefined in `naive` mode).
   * With a transactional side effect it resolves once the charge is committed.
   */
  charge(message: PaymentMessage, fencingToken: number | undefined): Promise<void>;
  close(): Promise<void>;
}

/** The orchestrator side: reads what was charged. */
export interface LedgerReader {
  /** Payments charged at least once (cheap, for progress). */
  countCharged(): Promise<number>;
  totals(): Promise<LedgerTotals>;
  /** Removes the run's ledger (the PostgreSQL schema; the Redis hash stays until the run id is reused). */
  drop(): Promise<void>;
}

/** Settings both sides need. */
export interface SideEffectSettings {
  readonly kind: SideEffectKind;
  readonly runId: string;
  readonly sdk: boolean;
  readonly databaseUrl: string;
}
