import { IdempotencyError } from '@idempotent-consumer/core';

/**
 * Stable machine-readable codes of the inbox's own errors (the core's are
 * {@link @idempotent-consumer/core!IdempotencyErrorCode}).
 */
export type InboxErrorCode = 'TRANSACTION_LOST' | 'TRANSACTION_ENDED';

/**
 * MySQL/MariaDB: a statement the effect ran through `tx` failed with an error after which InnoDB had rolled
 * the whole transaction back, or may have, and the effect caught it and carried on:
 * - a deadlock, `ER_LOCK_DEADLOCK` 1213;
 * - the lock table full, `ER_LOCK_TABLE_FULL` 1206 (lock structures outgrew the buffer pool);
 * - on MariaDB with `innodb_snapshot_isolation` on, a row changed since the read view, `ER_CHECKREAD` 1020;
 * - an error at the statement's end, `ER_ERROR_DURING_COMMIT` 1180 (MariaDB's bulk insert failing when
 *   applied), or a failed statement rollback, `ER_ERROR_DURING_ROLLBACK` 1181;
 * - a lock wait timeout, 1205, with `innodb_rollback_on_timeout` on, or when the setting could not be read;
 * - any error on MariaDB with `unique_checks` and `foreign_key_checks` both off in the session, where an
 *   INSERT into an empty table is a bulk insert, after which every error rolls back the whole transaction
 *   (or when those settings could not be read).
 *
 * Its later statements, the commit statement included, would run in autocommit or in a new transaction: the
 * row recorded committed while the writes made before the error are gone. The inbox rolls back instead and
 * throws this, with the database's error as `cause`. Retryable: the next attempt runs the whole effect in a
 * new transaction.
 *
 * Also thrown by `pgTransaction` when PostgreSQL answered its `COMMIT` with `ROLLBACK` (a statement of the
 * transaction had failed and the body resolved anyway): nothing of the transaction was committed, and the
 * body's value must not be taken for a committed one.
 */
export class TransactionLostError extends IdempotencyError<InboxErrorCode> {
  override readonly name = 'TransactionLostError' as const;
  readonly code = 'TRANSACTION_LOST' as const;
  readonly retryable = true;
}

/**
 * A statement sent through the `tx` of `TransactionalInbox.run` after the effect had settled: it
 * resolved (its transaction is being committed) or threw (rolled back). Refused without being sent: the
 * connection would run it after the transaction's end, in autocommit (or, given back to the pool, inside
 * another run's transaction), so it would stay although the run failed, and the retry would make the write
 * again. Such a statement comes from work the effect started without awaiting it: a continuation that runs
 * after the effect returned or threw. Statements the effect sent before it settled, awaited or not, are
 * never refused with it: they run in the transaction. Await every statement inside the effect. Not retryable:
 * a retry of the effect would leave it detached again.
 */
export class TransactionEndedError extends IdempotencyError<InboxErrorCode> {
  override readonly name = 'TransactionEndedError' as const;
  readonly code = 'TRANSACTION_ENDED' as const;
  readonly retryable = false;
}
