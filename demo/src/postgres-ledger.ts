import { redactUrl } from '@idempotent-consumer/core/tools';
import { pgClient, pgTransaction, type SqlClient, TransactionalInbox } from '@idempotent-consumer/inbox-sql';
import { Pool } from 'pg';
import type { PaymentMessage } from './broker';
import type { LedgerTotals } from './ledger';
import type { ChargeWriter, LedgerReader, SideEffectSettings } from './side-effect-contract';

/**
 * `--side-effect postgres`: each run gets a schema `demo_<run id>` with a `charges` table (deliberately
 * without a unique constraint, so a double charge is a second row) and the inbox table. In `sdk` mode a
 * charge is one transaction through the inbox (the row and the inbox entry commit together); in `naive`
 * mode it is the same INSERT without the inbox.
 */
const SCOPE = 'demo-payments';

function schemaOf(runId: string): string {
  return `demo_${runId.replace(/[^A-Za-z0-9_]/g, '_')}`;
}

async function insertCharge(tx: SqlClient, schema: string, message: PaymentMessage, token: number | null) {
  await tx.query(
    `INSERT INTO ${schema}.charges (payment_id, amount_cents, fencing_token) VALUES ($1, $2, $3)`,
    [message.paymentId, message.amountCents, token],
  );
}

/** Checks the database answers; resolves `null`, or a one-line explanation and how to fix it. */
export async function postgresPreflight(databaseUrl: string): Promise<string | null> {
  const pool = new Pool({ connectionString: databaseUrl, max: 1, connectionTimeoutMillis: 3000 });
  try {
    await pool.query('SELECT 1');
    return null;
  } catch (error) {
    return (
      `PostgreSQL is not reachable at ${redactUrl(databaseUrl)} (${(error as Error).message}).\n` +
      'Start it (for example: docker run -d -p 5432:5432 -e POSTGRES_HOST_AUTH_METHOD=trust postgres:16) ' +
      'or pass --database-url / DATABASE_URL.'
    );
  } finally {
    await pool.end().catch(() => {});
  }
}

/** Creates the run's schema, `charges` table and inbox table; reads the totals; drops the schema. */
export async function createPostgresLedger(settings: SideEffectSettings): Promise<LedgerReader> {
  const schema = schemaOf(settings.runId);
  const pool = new Pool({ connectionString: settings.databaseUrl, max: 2 });
  await pool.query(`CREATE SCHEMA ${schema}`);
  await pool.query(
    `CREATE TABLE ${schema}.charges (id bigserial PRIMARY KEY, payment_id text NOT NULL, amount_cents int NOT NULL, fencing_token bigint, charged_at timestamptz NOT NULL DEFAULT now())`,
  );
  await new TransactionalInbox({
    dialect: 'postgres',
    client: pgClient(pool),
    transaction: pgTransaction(pool),
    table: `${schema}.idempotency_inbox`,
  }).createSchema();
  return {
    async countCharged() {
      const { rows } = await pool.query(`SELECT COUNT(DISTINCT payment_id) AS n FROM ${schema}.charges`);
      return Number(rows[0].n);
    },
    async totals(): Promise<LedgerTotals> {
      const { rows } = await pool.query(
        `SELECT COUNT(*) AS charges, COUNT(DISTINCT payment_id) AS payments,
                (SELECT COUNT(*) FROM (SELECT payment_id FROM ${schema}.charges GROUP BY payment_id HAVING COUNT(*) > 1) d) AS doubled
           FROM ${schema}.charges`,
      );
      const chargesRecorded = Number(rows[0].charges);
      const paymentsCharged = Number(rows[0].payments);
      return {
        chargesRecorded,
        paymentsCharged,
        doubleCharges: chargesRecorded - paymentsCharged,
        doubleChargedPayments: Number(rows[0].doubled),
      };
    },
    async drop() {
      await pool.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`).finally(() => pool.end());
    },
  };
}

/** The consumer side: charges through the inbox (`sdk`) or with a bare transaction (`naive`). */
export function openPostgresWriter(settings: SideEffectSettings): ChargeWriter {
  const schema = schemaOf(settings.runId);
  const pool = new Pool({ connectionString: settings.databaseUrl, max: 4 });
  pool.on('error', () => {});
  const transaction = pgTransaction(pool);
  const inbox = new TransactionalInbox({
    dialect: 'postgres',
    client: pgClient(pool),
    transaction,
    table: `${schema}.idempotency_inbox`,
  });
  return {
    async charge(message, fencingToken) {
      if (!settings.sdk || fencingToken === undefined) {
        await transaction((tx) => insertCharge(tx, schema, message, null));
        return;
      }
      const context = { scope: SCOPE, key: message.idempotencyKey, fencingToken };
      await inbox.run(context, (tx) => insertCharge(tx, schema, message, fencingToken));
    },
    close: () => pool.end(),
  };
}
