import { pgTransaction, type SqlClient } from '@idempotent-consumer/inbox-sql';
import type { SqlDatabase } from '../../support/sql-database';
import { describeInbox, gate } from './fixture';

jest.setTimeout(60_000);

/**
 * Awaits `statement` (sent by the effect after it settled) and asserts that it was refused without being
 * sent, and that none of `keys` has a committed ledger row.
 */
async function expectRefusedAndNothingCommitted(
  db: SqlDatabase,
  statement: Promise<unknown>,
  keys: readonly string[],
): Promise<void> {
  const outcome = await statement.then(
    () => 'sent',
    (error: unknown) => error,
  );
  const ledger = await db.ledger();
  for (const key of keys) expect(ledger).not.toHaveProperty(key);
  expect(outcome).toMatchObject({ name: 'TransactionEndedError', code: 'TRANSACTION_ENDED' });
}

/**
 * Statements through `tx` that reach the database after the effect settled: its transaction is then being
 * rolled back or committed, and the pooled connection goes back to the pool, so such a statement would run
 * in autocommit (or inside another run's transaction) and stay, while the retry makes the write again.
 */
describeInbox('statements after the effect settled', (fx, dialect) => {
  if (dialect === 'mysql') {
    it('MySQL: a statement sent with one that fails (Promise.all) runs before the rollback of the rejected effect, never in autocommit after it', async () => {
      const { db, scope } = fx();
      const seen = `${db.schema}.seen_pipelined`;
      await db.client.query(`CREATE TABLE ${seen} (id INT PRIMARY KEY) ENGINE=InnoDB`, []);
      await db.client.query(`INSERT INTO ${seen} VALUES (7)`, []);
      const inbox = db.inbox();
      const key = 'pipelined-duplicate';
      let queued: Promise<unknown> | undefined;
      const run = inbox.run({ scope, key, fencingToken: 1 }, async (tx) => {
        await db.writeLedger(tx, key, 1);
        // Two statements at once, as an effect writes independent rows: the first fails (duplicate key,
        // which InnoDB rolls back alone), so Promise.all rejects and the effect with it, while the second
        // still waits behind the first.
        const failing = tx.query(`INSERT INTO ${seen} VALUES (7)`, []);
        queued = db.writeLedger(tx, `${key}-queued`, 1);
        await Promise.all([failing, queued]);
        return 'never';
      });
      await expect(run).rejects.toMatchObject({ errno: 1062 });
      // Before: the queued INSERT was sent after the rollback, in autocommit, and stayed. It is sent
      // before the ROLLBACK now, inside the transaction, which undoes it (as on PostgreSQL).
      await expect(queued).resolves.toBeUndefined();
      const ledger = await db.ledger();
      expect(ledger).not.toHaveProperty(key);
      expect(ledger).not.toHaveProperty(`${key}-queued`);
    });
  }

  it('a statement the effect sends after it threw (detached work) is refused, not run outside the transaction', async () => {
    const { db, scope } = fx();
    const inbox = db.inbox();
    const key = 'detached-after-throw';
    const rejected = gate();
    let detached: Promise<unknown> | undefined;
    const run = inbox.run({ scope, key, fencingToken: 1 }, async (tx) => {
      await db.writeLedger(tx, key, 1);
      detached = (async () => {
        await rejected.promise;
        await db.writeLedger(tx, `${key}-late`, 1);
      })();
      detached.catch(() => undefined);
      throw new Error('the effect fails');
    });
    await expect(run).rejects.toThrow('the effect fails');
    rejected.open();
    // Before: the late INSERT ran on the released connection, in autocommit, and stayed.
    await expectRefusedAndNothingCommitted(db, detached!, [key, `${key}-late`]);
  });

  it('an effect that throws before it returns a promise (not an async function): a statement sent later through its tx is refused, not run outside the transaction', async () => {
    const { db, scope } = fx();
    const inbox = db.inbox();
    const key = 'synchronous-throw';
    let kept: SqlClient | undefined;
    // A plain function typed to return a promise, which validates its input before it sends anything.
    const effect = (tx: SqlClient): Promise<string> => {
      kept = tx;
      throw new Error('invalid input');
    };
    await expect(inbox.run({ scope, key, fencingToken: 1 }, effect)).rejects.toThrow('invalid input');
    // Before, on PostgreSQL: the effect never settled as a promise, so its tx was never closed: the INSERT
    // ran on the released connection, in autocommit, and stayed.
    await expectRefusedAndNothingCommitted(db, db.writeLedger(kept!, `${key}-late`, 1), [`${key}-late`]);
  });

  it('a statement the effect sent before it threw, without awaiting it, runs inside the transaction (rolled back), as the README says', async () => {
    const { db, scope } = fx();
    const inbox = db.inbox();
    const key = 'sent-before-throw';
    let sent: Promise<unknown> | undefined;
    const run = inbox.run({ scope, key, fencingToken: 1 }, async (tx) => {
      await db.writeLedger(tx, key, 1);
      sent = db.writeLedger(tx, `${key}-unawaited`, 1);
      sent.catch(() => undefined);
      throw new Error('the effect fails');
    });
    await expect(run).rejects.toThrow('the effect fails');
    const outcome = await sent!.then(
      () => 'ran',
      (error: unknown) => error,
    );
    const ledger = await db.ledger();
    expect(ledger).not.toHaveProperty(key);
    expect(ledger).not.toHaveProperty(`${key}-unawaited`);
    // Before, on MySQL: refused with TransactionEndedError ("sent through tx after the effect settled"),
    // though it was sent before; on PostgreSQL it ran in the transaction. An effect that does not keep the
    // promise (`void tx.query(...)`) got an unhandled rejection, which ends a Node process.
    expect(outcome).toBe('ran');
  });

  if (dialect === 'postgres') {
    it('PostgreSQL: a statement the effect sends after it returned fails between the commit statement and COMMIT: never reported committed with nothing committed', async () => {
      const { db, scope } = fx();
      const inbox = db.inbox();
      const key = 'detached-after-return';
      let detached: Promise<unknown> | undefined;
      const run = inbox.run({ scope, key, fencingToken: 1 }, async (tx) => {
        await db.writeLedger(tx, key, 1);
        // Not awaited: a follow-up statement sent once the first answers, after the effect returned.
        detached = tx.query('SELECT 1', []).then(() => tx.query('SELECT 1 / 0', []));
        detached.catch(() => undefined);
        return 'returned';
      });
      const outcome = await run.then(
        (value) => value,
        (error: unknown) => error,
      );
      const late = await detached!.then(
        () => 'sent',
        (error: unknown) => error,
      );
      const row = await inbox.read({ scope, key });
      // Before: the follow-up ran between the commit statement and COMMIT and failed, so PostgreSQL answered
      // COMMIT with ROLLBACK, without an error: the run reported `committed` (the runner would complete the
      // record and ack the message) while neither the inbox row nor the ledger row was committed.
      expect(row).toMatchObject({ fencingToken: 1, committedAtMs: expect.any(Number) });
      expect(await db.ledger()).toMatchObject({ [key]: 1 });
      expect(outcome).toEqual({ status: 'committed', result: 'returned' });
      expect(late).toMatchObject({ code: 'TRANSACTION_ENDED' });
    });

    it('PostgreSQL: pgTransaction rejects when COMMIT rolled back a failed transaction instead of resolving as committed', async () => {
      const { db, databaseUrl } = fx();
      const { Pool } = await import('pg');
      const pool = new Pool({ connectionString: databaseUrl, max: 1 });
      const key = 'pg-transaction-commit-rolled-back';
      try {
        const outcome = await pgTransaction(pool)(async (tx) => {
          await db.writeLedger(tx, key, 1);
          await tx.query('SELECT 1 / 0', []).catch(() => undefined);
          return 'resolved';
        }).then(
          (value) => value,
          (error: unknown) => error,
        );
        expect(await db.ledger()).not.toHaveProperty(key);
        // Before: 'resolved', though the server answered COMMIT with ROLLBACK.
        expect(outcome).toMatchObject({ name: 'TransactionLostError', retryable: true });
      } finally {
        await pool.end();
      }
    });
  }
});
