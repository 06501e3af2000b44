import type { Redis } from 'ioredis';
import { countCharged, readLedger, recordCharge } from './ledger';
import type { ChargeWriter, LedgerReader, SideEffectSettings } from './side-effect-contract';

/** Opens the consumer side in a consumer process. */
export async function openChargeWriter(settings: SideEffectSettings, redis: Redis): Promise<ChargeWriter> {
  if (settings.kind === 'postgres')
    return (await import('./postgres-ledger.js')).openPostgresWriter(settings);
  return {
    charge: (message) => recordCharge(redis, settings.runId, message.paymentId),
    close: async () => {},
  };
}

/** Opens (and for PostgreSQL creates) the run's ledger in the orchestrator. */
export async function openLedgerReader(settings: SideEffectSettings, redis: Redis): Promise<LedgerReader> {
  if (settings.kind === 'postgres')
    return (await import('./postgres-ledger.js')).createPostgresLedger(settings);
  return {
    countCharged: () => countCharged(redis, settings.runId),
    totals: () => readLedger(redis, settings.runId),
    drop: async () => {},
  };
}
