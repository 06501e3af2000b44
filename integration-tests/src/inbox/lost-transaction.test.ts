import { defaultIsRetryable } from '@idempotent-consumer/core';
import { mysqlTransaction, type TransactionalInbox } from '@idempotent-consumer/inbox-sql';
import type { SqlDatabase } from '../../support/sql-database';
import { describeInbox, gate } from './fixture';

jest.setTimeout(60_000);

/** After a refused run of `key` with token 1: its row is uncommitted, and a retry (token 2) commits once. */
async function expectRetryCommitsOnce(
  db: SqlDatabase,
  inbox: TransactionalInbox,
  scope: string,
  key: string,
): Promise<void> {
  expect(await inbox.read({ scope, key })).toMatchObject({ fencingToken: 1, committedAtMs: undefined });
  await expect(
    inbox.run({ scope, key, fencingToken: 2 }, async (tx) => {
      await db.writeLedger(tx, key, 2);
      return 'retried';
    }),
  ).resolves.toEqual({ status: 'committed', result: 'retried' });
  expect(await db.ledgerTokens(key)).toEqual([2]);
}

/**
 * MySQL: a fresh table `locks` (rows 1 and 2) and another transaction that holds row 2 after writing many
 * rows: InnoDB rolls back the lighter transaction of a deadlock, so the victim is the inbox's (whichever of
 * the two lock requests closes the cycle). `closeCycle` asks for row 1, which the effect locked before
 * waiting for row 2, then rolls the other transaction back; `end` closes its connection.
 */
async function lockHolder(db: SqlDatabase, databaseUrl: string, name: string) {
  const locks = `${db.schema}.${name}`;
  await db.client.query(`CREATE TABLE ${locks} (id INT PRIMARY KEY, v INT NOT NULL) ENGINE=InnoDB`, []);
  await db.client.query(`INSERT INTO ${locks} VALUES (1, 0), (2, 0)`, []);
  await db.client.query(`CREATE TABLE ${locks}_weight (id INT PRIMARY KEY) ENGINE=InnoDB`, []);
  const mysql = await import('mysql2/promise');
  const other = await mysql.createConnection({ uri: databaseUrl });
  await other.beginTransaction();
  const ids = Array.from({ length: 200 }, (_, i) => i);
  await other.query(`INSERT INTO ${locks}_weight (id) VALUES ${ids.map(() => '(?)').join(', ')}`, ids);
  await other.query(`UPDATE ${locks} SET v = v + 1 WHERE id = 2`);
  return {
    locks,
    async closeCycle() {
      await other.query(`UPDATE ${locks} SET v = v + 1 WHERE id = 1`);
      await other.rollback();
    },
    end: () => other.end(),
  };
}

describeInbox('an effect that catches an error and carries on', (fx, dialect) => {
  // Only on MySQL/MariaDB: PostgreSQL: see the next test.
  if (dialect === 'mysql') {
    it('MySQL: a deadlock caught by the effect rolled its transaction back: the inbox refuses to commit, retryably', async () => {
      const { databaseUrl, db, scope } = fx();
      const holder = await lockHolder(db, databaseUrl, 'locks');
      const { locks } = holder;
      const inbox = db.inbox();
      const key = 'deadlock-caught';
      try {
        const aLocked = gate();
        let caught: unknown;
        let afterError: unknown;
        const run = inbox.run({ scope, key, fencingToken: 1 }, async (tx) => {
          await db.writeLedger(tx, key, 1); // the write that the deadlock's rollback takes away
          await tx.query(`UPDATE ${locks} SET v = v + 1 WHERE id = 1`, []);
          aLocked.open();
          try {
            await tx.query(`UPDATE ${locks} SET v = v + 1 WHERE id = 2`, []); // waits for the other
          } catch (error) {
            caught = error; // swallowed: the effect carries on as if only this statement had failed
          }
          // In autocommit now: this write would be committed on its own, and made again by the retry.
          await db.writeLedger(tx, `${key}-after`, 1).catch((error: unknown) => {
            afterError = error;
          });
          return 'carried on';
        });
        await aLocked.promise;
        // Waits for the inbox transaction's lock on row 1: a cycle with its wait on row 2.
        await holder.closeCycle();
        const outcome = await run.then(
          (value) => value,
          (error: unknown) => error,
        );
        expect(caught).toMatchObject({ errno: 1213 });
        expect(await db.ledger()).not.toHaveProperty(key);
        expect(afterError).toMatchObject({ name: 'TransactionLostError' }); // refused, never sent
        expect(await db.ledger()).not.toHaveProperty(`${key}-after`);
        // Before: { status: 'committed' } with the ledger row gone, and the inbox row committed for good.
        expect(outcome).toMatchObject({
          name: 'TransactionLostError',
          code: 'TRANSACTION_LOST',
          retryable: true,
        });
        expect(defaultIsRetryable(outcome)).toBe(true);
        // The retry runs the effect again, whole, and commits it once.
        await expectRetryCommitsOnce(db, inbox, scope, key);
      } finally {
        await holder.end();
      }
    });
  }

  if (dialect === 'mysql') {
    it('MySQL: a statement sent with the one that deadlocks (Promise.all) is not run in autocommit after the rollback', async () => {
      const { databaseUrl, db, scope } = fx();
      const holder = await lockHolder(db, databaseUrl, 'locks_pipelined');
      const { locks } = holder;
      const inbox = db.inbox();
      const key = 'deadlock-pipelined';
      try {
        const aLocked = gate();
        const run = inbox.run({ scope, key, fencingToken: 1 }, async (tx) => {
          await db.writeLedger(tx, key, 1);
          await tx.query(`UPDATE ${locks} SET v = v + 1 WHERE id = 1`, []);
          // Two statements at once, as an effect writes independent rows: the first waits for the other
          // transaction and is the deadlock's victim; the second is queued behind it on the connection.
          const both = Promise.all([
            tx.query(`UPDATE ${locks} SET v = v + 1 WHERE id = 2`, []),
            db.writeLedger(tx, `${key}-queued`, 1),
          ]);
          aLocked.open();
          await both;
          return 'never';
        });
        await aLocked.promise;
        await holder.closeCycle();
        const outcome = await run.then(
          (value) => value,
          (error: unknown) => error,
        );
        expect(defaultIsRetryable(outcome)).toBe(true);
        // Before: the queued INSERT ran after InnoDB's rollback, in autocommit, and stayed; the retry
        // below then wrote it a second time.
        const ledger = await db.ledger();
        expect(ledger).not.toHaveProperty(key);
        expect(ledger).not.toHaveProperty(`${key}-queued`);
        expect(await inbox.read({ scope, key })).toMatchObject({ fencingToken: 1, committedAtMs: undefined });
        await expect(
          inbox.run({ scope, key, fencingToken: 2 }, async (tx) => {
            await Promise.all([db.writeLedger(tx, key, 2), db.writeLedger(tx, `${key}-queued`, 2)]);
            return 'retried';
          }),
        ).resolves.toEqual({ status: 'committed', result: 'retried' });
        expect(await db.ledgerTokens(`${key}-queued`)).toEqual([2]);
      } finally {
        await holder.end();
      }
    });
  }

  if (dialect === 'mysql') {
    it('MariaDB with innodb_snapshot_isolation: a caught 1020 (record changed) rolled the transaction back: refused, retryably', async () => {
      const { databaseUrl, db, scope } = fx();
      const { schema } = db;
      const mysql = await import('mysql2/promise');
      const connection = await mysql.createConnection({ uri: databaseUrl });
      const other = await mysql.createConnection({ uri: databaseUrl });
      try {
        try {
          // MariaDB 10.6.18+ (on by default from 11.8); MySQL has no such variable: nothing to check there.
          await connection.query('SET SESSION innodb_snapshot_isolation = ON');
        } catch (error) {
          if ((error as { errno?: number }).errno === 1193) return; // unknown system variable
          throw error;
        }
        await db.client.query(
          `CREATE TABLE ${schema}.balances (id INT PRIMARY KEY, v INT NOT NULL) ENGINE=InnoDB`,
          [],
        );
        await db.client.query(`INSERT INTO ${schema}.balances VALUES (1, 0)`, []);
        // One connection with the setting, as a pool whose sessions set it (or the server's default).
        const transaction = mysqlTransaction({
          getConnection: async () => ({
            query: (sql: string, values?: unknown[]) => connection.query(sql, values),
            beginTransaction: () => connection.beginTransaction(),
            commit: () => connection.commit(),
            rollback: () => connection.rollback(),
            release: () => {},
            destroy: () => connection.destroy(),
          }),
        });
        const inbox = db.inbox({ transaction });
        const key = 'record-changed-caught';
        let caught: unknown;
        const run = inbox.run({ scope, key, fencingToken: 1 }, async (tx) => {
          await db.writeLedger(tx, key, 1); // the write that the rollback takes away
          await tx.query(`SELECT v FROM ${schema}.balances WHERE id = 1`, []); // the read view
          await other.query(`UPDATE ${schema}.balances SET v = v + 1 WHERE id = 1`); // autocommitted
          try {
            await tx.query(`UPDATE ${schema}.balances SET v = v + 10 WHERE id = 1`, []);
          } catch (error) {
            caught = error; // swallowed, as an optimistic-update fallback would
          }
          return 'carried on';
        });
        const outcome = await run.then(
          (value) => value,
          (error: unknown) => error,
        );
        expect(caught).toMatchObject({ errno: 1020 });
        expect(await db.ledger()).not.toHaveProperty(key);
        // Before: { status: 'committed' }, the inbox row committed in autocommit without the ledger row.
        expect(outcome).toMatchObject({ name: 'TransactionLostError', retryable: true });
        await expectRetryCommitsOnce(db, inbox, scope, key);
      } finally {
        await connection.end();
        await other.end();
      }
    });
  }

  if (dialect === 'mysql') {
    it('MySQL: a caught lock wait timeout leaves the transaction whole (the default): it commits with its writes', async () => {
      const { databaseUrl, db, scope } = fx();
      const { schema } = db;
      await db.client.query(
        `CREATE TABLE ${schema}.waits (id INT PRIMARY KEY, v INT NOT NULL) ENGINE=InnoDB`,
        [],
      );
      await db.client.query(`INSERT INTO ${schema}.waits VALUES (1, 0)`, []);
      const { rows } = await db.client.query('SELECT @@innodb_rollback_on_timeout AS r', []);
      if (Number(rows[0]?.r) === 1) return; // a server configured to roll back: the deadlock's case
      const mysql = await import('mysql2/promise');
      const other = await mysql.createConnection({ uri: databaseUrl });
      const key = 'lock-wait-caught';
      try {
        await other.beginTransaction();
        await other.query(`UPDATE ${schema}.waits SET v = v + 1 WHERE id = 1`);
        let caught: unknown;
        const run = db.inbox().run({ scope, key, fencingToken: 1 }, async (tx) => {
          await db.writeLedger(tx, key, 1);
          await tx.query('SET SESSION innodb_lock_wait_timeout = 1', []);
          try {
            await tx.query(`UPDATE ${schema}.waits SET v = v + 1 WHERE id = 1`, []); // held by the other
          } catch (error) {
            caught = error;
          } finally {
            await tx.query('SET SESSION innodb_lock_wait_timeout = DEFAULT', []);
          }
          return 'carried on';
        });
        await expect(run).resolves.toEqual({ status: 'committed', result: 'carried on' });
        expect(caught).toMatchObject({ errno: 1205 });
        expect(await db.ledgerTokens(key)).toEqual([1]);
      } finally {
        await other.rollback();
        await other.end();
      }
    });
  }

  if (dialect === 'postgres') {
    it('PostgreSQL: a caught error aborts the transaction, so the commit statement fails: nothing is recorded', async () => {
      const { db, scope } = fx();
      const inbox = db.inbox();
      const key = 'error-caught';
      const run = inbox.run({ scope, key, fencingToken: 1 }, async (tx) => {
        await db.writeLedger(tx, key, 1);
        await tx.query('SELECT 1 / 0', []).catch(() => undefined);
        return 'carried on';
      });
      await expect(run).rejects.toMatchObject({ code: '25P02' }); // in failed SQL transaction
      expect(await db.ledger()).not.toHaveProperty(key);
      expect(await inbox.read({ scope, key })).toMatchObject({ committedAtMs: undefined });
    });
  }
});
