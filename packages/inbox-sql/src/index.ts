/**
 * `@idempotent-consumer/inbox-sql`, a transactional inbox for PostgreSQL, MySQL and MariaDB. The side effect
 * and a row of scope, idempotency key and fencing token commit in one database transaction. So a database
 * side effect happens at most once per key, even across crashes and lost Redis records. @packageDocumentation
 */
export {
  DEFAULT_INBOX_TABLE,
  type InboxStatements,
  inboxSchemaSql,
  inboxStatements,
  quoteTable,
  type SqlDialect,
} from './dialect';
export { type InboxErrorCode, TransactionEndedError, TransactionLostError } from './errors';
export {
  DEFAULT_INBOX_RETENTION_MS,
  type InboxContext,
  type InboxRow,
  type InboxRunResult,
  TransactionalInbox,
  type TransactionalInboxOptions,
} from './inbox';
export { type MysqlPool, type MysqlQueryable, mysqlClient, mysqlTransaction } from './mysql';
export { type PgPool, type PgQueryable, pgClient, pgTransaction } from './pg';
export type { RunInTransaction, SqlClient, SqlResult } from './sql-client';
