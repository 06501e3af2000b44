import type { SqlClient } from './sql-client';

/**
 * MySQL and MariaDB error numbers after which InnoDB has rolled back the whole transaction, not only the
 * failed statement. They come from InnoDB's `row_mysql_handle_errors` and from MariaDB's end of a statement
 * that applied a bulk insert.
 * - `ER_LOCK_DEADLOCK` 1213, the deadlock's victim.
 * - `ER_LOCK_TABLE_FULL` 1206. The lock structures outgrew the buffer pool.
 * - `ER_CHECKREAD` 1020, on MariaDB with `innodb_snapshot_isolation` on, the default from 11.8. A locking
 *   read or a write at REPEATABLE READ met a row changed after the transaction's read view.
 * - `ER_ERROR_DURING_COMMIT` 1180 from a statement, not from `COMMIT`. MariaDB's bulk insert failed when
 *   applied at the statement's end, and InnoDB rolled back everything.
 * - `ER_ERROR_DURING_ROLLBACK` 1181. The statement's own rollback failed, so what is left is unknown.
 */
const ALWAYS_LOST: ReadonlyMap<number, { readonly code: string } & TransactionLoss> = new Map([
  [1213, { code: 'ER_LOCK_DEADLOCK', reason: 'deadlock', certain: true }],
  [1206, { code: 'ER_LOCK_TABLE_FULL', reason: 'lock table full', certain: true }],
  [
    1020,
    {
      code: 'ER_CHECKREAD',
      reason: 'record changed since the read view, innodb_snapshot_isolation',
      certain: true,
    },
  ],
  [
    1180,
    { code: 'ER_ERROR_DURING_COMMIT', reason: "error at the statement's end, a bulk insert", certain: true },
  ],
  [1181, { code: 'ER_ERROR_DURING_ROLLBACK', reason: "the statement's rollback failed", certain: false }],
]);

/** A lock wait timeout. InnoDB rolls back the whole transaction only with `innodb_rollback_on_timeout`. */
const ER_LOCK_WAIT_TIMEOUT = 1205;

/** How a statement's failure left its transaction, when it may have rolled it back whole. */
export interface TransactionLoss {
  /** What rolled it back, for the error message. */
  readonly reason: string;
  /** True when InnoDB did roll it back. False when it may have, because a setting could not be read. */
  readonly certain: boolean;
}

/**
 * Whether InnoDB rolled back the whole transaction when a statement on `tx` failed with `error`, or
 * `undefined` when only the statement was rolled back. Unknown counts as rolled back, with `certain: false`.
 * Refusing the commit costs a retry of the whole effect, while committing after a lost transaction records
 * the key without the writes before the error. When the answer depends on a setting, it asks the server with
 * one read through `tx` that changes nothing.
 * - The error numbers of {@link ALWAYS_LOST} are rolled back, and the server is not asked. They are also
 *   recognised by mysql2's `code` name and as an ORM's `cause`.
 * - A lock wait timeout, 1205, is rolled back with `innodb_rollback_on_timeout` on, or when that cannot be
 *   read. It is read in the same `SELECT` as the checks below.
 * - Any other failure is a loss on MariaDB 10.6+ with `unique_checks` and `foreign_key_checks` both off in
 *   the session. An INSERT into an empty table is then a bulk insert, after which InnoDB answers any error of
 *   the transaction by rolling it back whole, under the statement's own error number. The inbox cannot see
 *   whether such an INSERT ran, so it counts the transaction lost. With either check on, the default, or on
 *   MySQL, nothing is lost.
 * The read must run before any other statement of the session, because the settings are the session's at the
 * failure. The caller runs it only when a statement is to follow in the transaction.
 */
export async function transactionLossOf(error: unknown, tx: SqlClient): Promise<TransactionLoss | undefined> {
  const errno = errnoOf(error);
  const always = errno === undefined ? undefined : ALWAYS_LOST.get(errno);
  if (always) return { reason: always.reason, certain: always.certain };
  const lockWait = errno === ER_LOCK_WAIT_TIMEOUT;
  const row = await readRow(
    tx,
    `SELECT ${lockWait ? '@@innodb_rollback_on_timeout AS rollback_on_timeout, ' : ''}@@unique_checks AS unique_checks, @@foreign_key_checks AS foreign_key_checks, VERSION() LIKE '%MariaDB%' AS mariadb`,
  );
  if (row === undefined) {
    return {
      reason: lockWait
        ? 'lock wait timeout; innodb_rollback_on_timeout could not be read'
        : 'an error, and unique_checks and foreign_key_checks could not be read',
      certain: false,
    };
  }
  if (lockWait && Number(row.rollback_on_timeout) === 1)
    return { reason: 'lock wait timeout', certain: true };
  const bulk =
    Number(row.unique_checks) === 0 && Number(row.foreign_key_checks) === 0 && Number(row.mariadb) === 1;
  if (!bulk) return undefined;
  return {
    reason:
      "an error with unique_checks and foreign_key_checks off, where MariaDB's bulk insert into an empty table rolls back the whole transaction",
    certain: false,
  };
}

/**
 * The MySQL error number of `error`, from `errno` or from mysql2's `code` name of a number the inbox knows.
 * An ORM's wrapper is looked through via `cause`. `undefined` when none is found.
 */
function errnoOf(error: unknown): number | undefined {
  for (let e = error, depth = 0; e && depth < 5; e = (e as { cause?: unknown }).cause, depth++) {
    const { errno, code } = e as { errno?: unknown; code?: unknown };
    if (typeof errno === 'number' && (ALWAYS_LOST.has(errno) || errno === ER_LOCK_WAIT_TIMEOUT)) return errno;
    if (code === 'ER_LOCK_WAIT_TIMEOUT') return ER_LOCK_WAIT_TIMEOUT;
    for (const [number, known] of ALWAYS_LOST) if (code === known.code) return number;
  }
  return undefined;
}

/** The first row of `sql` on `tx`; `undefined` when the read fails or returns no row. */
async function readRow(tx: SqlClient, sql: string): Promise<Record<string, unknown> | undefined> {
  try {
    const { rows } = await tx.query(sql, []);
    return rows[0];
  } catch {
    return undefined;
  }
}
