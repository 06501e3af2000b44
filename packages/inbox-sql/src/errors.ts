import { IdempotencyError } from '@idempotent-consumer/core';

/**
 * Stable machine-readable codes of the inbox's own errors (the core's are
 * {@link @idempotent-consumer/core!IdempotencyErrorCode}).
 */
export type InboxErrorCode = 'TRANSACTION_LOST';

/**
 * MySQL/MariaDB: a statement the effect ran through `tx` failed with an error after which InnoDB had rolled
 * the whole transaction back (a deadlock, `ER_LOCK_DEADLOCK` 1213; on MariaDB with
 * `innodb_snapshot_isolation` on, a row changed since the read view, `ER_CHECKREAD` 1020; a lock wait
 * timeout, 1205, with `innodb_rollback_on_timeout` on, or with a setting that could not be read), and the
 * effect caught it and
 * carried on. Its later statements, the commit statement included, would run in autocommit: the row recorded
 * committed while the writes made before the error are gone. The inbox rolls back instead and throws this,
 * with the database's error as `cause`. Retryable: the next attempt runs the whole effect in a new
 * transaction.
 */
export class TransactionLostError extends IdempotencyError<InboxErrorCode> {
  override readonly name = 'TransactionLostError' as const;
  readonly code = 'TRANSACTION_LOST' as const;
  readonly retryable = true;
}
