import { defaultIsRetryable } from '@idempotent-consumer/core';
import {
  mysqlTransaction,
  type RunInTransaction,
  type SqlClient,
  type TransactionalInbox,
} from '@idempotent-consumer/inbox-sql';
import type { Connection } from 'mysql2/promise';
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

/** A {@link mysqlTransaction} on one connection (whose session settings a test chose), never released. */
function oneConnectionTransaction(connection: Connection): RunInTransaction {
  return mysqlTransaction({
    getConnection: async () => ({
      query: (sql: string, values?: unknown[]) => connection.query(sql, values),
      beginTransaction: () => connection.beginTransaction(),
      commit: () => connection.commit(),
      rollback: () => connection.rollback(),
      release: () => {},
      destroy: () => connection.destroy(),
    }),
  });
}

/**
 * MariaDB (10.6+) with `unique_checks` and `foreign_key_checks` off: a connection for `inbox.run`, and a
 * fresh empty table `name` (id primary key), whose first INSERT in a transaction is a bulk insert; InnoDB
 * then rolls the whole transaction back on any error until it ends. `undefined` on MySQL, which has no
 * such mode. `end` closes the connection (the settings go with it).
 */
async function bulkInsertSession(db: SqlDatabase, databaseUrl: string, name: string) {
  const { rows } = await db.client.query('SELECT VERSION() AS version', []);
  if (!String(rows[0]?.version).includes('MariaDB')) return undefined;
  const mysql = await import('mysql2/promise');
  const connection = await mysql.createConnection({ uri: databaseUrl });
  await connection.query('SET SESSION unique_checks = 0, foreign_key_checks = 0');
  const table = `${db.schema}.${name}`;
  await db.client.query(`CREATE TABLE ${table} (id INT PRIMARY KEY) ENGINE=InnoDB`, []);
  const inbox = db.inbox({ transaction: oneConnectionTransaction(connection) });
  return {
    table,
    inbox,
    /**
     * Asserts that the run of `key` (token 1) was refused retryably with its ledger write gone, then, with
     * the checks back on, that a retry commits once.
     */
    async expectLostThenRetried(scope: string, key: string, outcome: unknown) {
      expect(await db.ledger()).not.toHaveProperty(key);
      // Before: { status: 'committed' }, the inbox row committed without the ledger row.
      expect(outcome).toMatchObject({ name: 'TransactionLostError', retryable: true });
      await connection.query('SET SESSION unique_checks = 1, foreign_key_checks = 1');
      await expectRetryCommitsOnce(db, inbox, scope, key);
    },
    end: () => connection.end(),
  };
}

/**
 * `transaction` with every statement the inbox and the effect send through `tx` recorded in `sent`: what
 * the watch costs on a failure path, counted.
 */
function countingTransaction(transaction: RunInTransaction, sent: string[]): RunInTransaction {
  return (body) =>
    transaction((tx) =>
      body({
        query: (sql, params) => {
          sent.push(sql);
          return tx.query(sql, params);
        },
      }),
    );
}

/** The statements of `sent` that are the inbox's reads of session or server settings (`SELECT @@…`). */
const settingReads = (sent: readonly string[]) => sent.filter((sql) => sql.includes('@@'));

/**
 * Runs `key` with token 1 through `inbox`: a ledger write, then `carryOn`, whose statement fails and whose
 * error it catches (returned as `caught`); `outcome` is the run's value or error.
 */
async function runCarryingOn(
  db: SqlDatabase,
  inbox: TransactionalInbox,
  scope: string,
  key: string,
  carryOn: (tx: SqlClient) => Promise<unknown>,
): Promise<{ caught: unknown; outcome: unknown }> {
  let caught: unknown;
  const outcome = await inbox
    .run({ scope, key, fencingToken: 1 }, async (tx) => {
      await db.writeLedger(tx, key, 1); // the write that the rollback takes away
      await carryOn(tx).catch((error: unknown) => {
        caught = error;
      });
      return 'carried on';
    })
    .then(
      (value) => value,
      (error: unknown) => error,
    );
  return { caught, outcome };
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
        const inbox = db.inbox({ transaction: oneConnectionTransaction(connection) });
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
    it('MariaDB bulk insert: a caught 1180 at the end of an INSERT into an empty table rolled the transaction back: refused, retryably', async () => {
      const { databaseUrl, db, scope } = fx();
      const bulk = await bulkInsertSession(db, databaseUrl, 'bulk_end');
      if (!bulk) return; // MySQL: no bulk-insert mode
      const key = 'bulk-end-caught';
      try {
        const { caught, outcome } = await runCarryingOn(db, bulk.inbox, scope, key, (tx) =>
          // Duplicates in a bulk insert are found when it is applied, at the statement's end.
          tx.query(`INSERT INTO ${bulk.table} (id) VALUES (1), (1)`, []),
        );
        expect(caught).toMatchObject({ errno: 1180 }); // "Got error 1 during COMMIT"
        await bulk.expectLostThenRetried(scope, key, outcome);
      } finally {
        await bulk.end();
      }
    });
  }

  if (dialect === 'mysql') {
    it('MariaDB bulk insert: a caught duplicate-key error after an INSERT into an empty table rolled the whole transaction back: refused', async () => {
      const { databaseUrl, db, scope } = fx();
      const bulk = await bulkInsertSession(db, databaseUrl, 'bulk_dup');
      if (!bulk) return;
      await db.client.query(`CREATE TABLE ${db.schema}.seen (id INT PRIMARY KEY) ENGINE=InnoDB`, []);
      await db.client.query(`INSERT INTO ${db.schema}.seen VALUES (7)`, []);
      const key = 'bulk-dup-caught';
      try {
        const { caught, outcome } = await runCarryingOn(db, bulk.inbox, scope, key, async (tx) => {
          await tx.query(`INSERT INTO ${bulk.table} (id) VALUES (1)`, []); // a bulk insert
          // An "insert, or skip if seen" that would lose only this statement without the bulk insert.
          await tx.query(`INSERT INTO ${db.schema}.seen VALUES (7)`, []);
        });
        expect(caught).toMatchObject({ errno: 1062 });
        await bulk.expectLostThenRetried(scope, key, outcome);
      } finally {
        await bulk.end();
      }
    });
  }

  if (dialect === 'mysql') {
    it('MySQL: a caught duplicate-key error with the checks on (the default) loses only its statement: it commits with its writes', async () => {
      const { db, scope } = fx();
      await db.client.query(`CREATE TABLE ${db.schema}.seen_once (id INT PRIMARY KEY) ENGINE=InnoDB`, []);
      await db.client.query(`INSERT INTO ${db.schema}.seen_once VALUES (7)`, []);
      const key = 'duplicate-caught';
      const { caught, outcome } = await runCarryingOn(db, db.inbox(), scope, key, (tx) =>
        tx.query(`INSERT INTO ${db.schema}.seen_once VALUES (7)`, []),
      );
      expect(outcome).toEqual({ status: 'committed', result: 'carried on' });
      expect(caught).toMatchObject({ errno: 1062 });
      expect(await db.ledgerTokens(key)).toEqual([1]);
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
        const sent: string[] = [];
        const inbox = db.inbox({ transaction: countingTransaction(db.transaction, sent) });
        const run = inbox.run({ scope, key, fencingToken: 1 }, async (tx) => {
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
        // One read of the settings for the lock wait timeout (before: two, rollback setting then checks).
        expect(settingReads(sent)).toHaveLength(1);
      } finally {
        await other.rollback();
        await other.end();
      }
    });
  }

  if (dialect === 'mysql') {
    it('MySQL: a failed statement the effect does not catch costs no read of the settings: only the statements of the effect are sent', async () => {
      const { db, scope } = fx();
      await db.client.query(`CREATE TABLE ${db.schema}.seen_uncaught (id INT PRIMARY KEY) ENGINE=InnoDB`, []);
      await db.client.query(`INSERT INTO ${db.schema}.seen_uncaught VALUES (7)`, []);
      const sent: string[] = [];
      const inbox = db.inbox({ transaction: countingTransaction(db.transaction, sent) });
      const key = 'duplicate-uncaught';
      const run = inbox.run({ scope, key, fencingToken: 1 }, async (tx) => {
        await db.writeLedger(tx, key, 1);
        await tx.query(`INSERT INTO ${db.schema}.seen_uncaught VALUES (7)`, []);
      });
      await expect(run).rejects.toMatchObject({ errno: 1062 });
      // Before: 3, the failed INSERT followed by a SELECT of unique_checks/foreign_key_checks whose answer
      // nothing used (the transaction rolls back with the effect's error).
      expect(sent).toHaveLength(2);
      expect(settingReads(sent)).toEqual([]);
      expect(await db.ledger()).not.toHaveProperty(key);
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
