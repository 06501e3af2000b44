import { IdempotencyError } from '@idempotent-consumer/core';

/**
 * Stable machine-readable codes of the inbox's own errors. The core's are
 * {@link @idempotent-consumer/core!IdempotencyErrorCode}.
 */
export type InboxErrorCode = 'TRANSACTION_LOST' | 'TRANSACTION_ENDED';

/**
 * On MySQL and MariaDB, a statement the effect ran through `tx` failed with an error after which InnoDB had
 * rolled the whole transaction back, or may have, and the effect caught it and went on. The errors are:
 * - a deadlock, `ER_LOCK_DEADLOCK` 1213;
 * - a full lock table, `ER_LOCK_TABLE_FULL` 1206;
 * - on MariaDB with `innodb_snapshot_isolation` on, a row changed since the read view, `ER_CHECKREAD` 1020;
 * - an error at the statement's end, `ER_ERROR_DURING_COMMIT` 1180, or a failed statement rollback,
 *   `ER_ERROR_DURING_ROLLBACK` 1181;
 * - a lock wait timeout, 1205, with `innodb_rollback_on_timeout` on or unreadable;
 * - any error on MariaDB with `unique_checks` and `foreign_key_checks` both off in the session, or
 *   unreadable. An INSERT into an empty table is then a bulk insert, after which every error rolls back the
 *   whole transaction.
 *
 * The later statements, the commit statement included, would run in autocommit or in a new transaction. The
 * row would be recorded committed while the writes made before the error are gone. So the inbox rolls back
 * and throws this, with the database's error as `cause`. Retryable, since the next attempt runs the whole
 * effect in a new transaction.
 *
 * `pgTransaction` throws it too when PostgreSQL answered its `COMMIT` with `ROLLBACK`, because a statement
 * had failed and the body resolved anyway. Nothing was committed, and the body's value must not be taken for
 * a committed one.
 */
export class TransactionLostError extends IdempotencyError<InboxErrorCode> {
  override readonly name = 'TransactionLostError' as const;
  readonly code = 'TRANSACTION_LOST' as const;
  readonly retryable = true;
}

/**
 * A statement was sent through the `tx` of `TransactionalInbox.run` after the effect had settled, that is,
 * resolved or thrown. It is refused unsent. The connection would run it after the transaction's end, in
 * autocommit or inside another run's transaction, so the write would stay although the run failed, and the
 * retry would make it again. Such a statement comes from work the effect started without awaiting it.
 * Statements sent before the effect settled, awaited or not, run in the transaction and are never refused.
 * Await every statement inside the effect. Not retryable, since a retry would leave it detached again.
 */
export class TransactionEndedError extends IdempotencyError<InboxErrorCode> {
  override readonly name = 'TransactionEndedError' as const;
  readonly code = 'TRANSACTION_ENDED' as const;
  readonly retryable = false;
}
