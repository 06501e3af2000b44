import { InvalidOptionError } from '@idempotent-consumer/core';

/** The SQL dialects the inbox speaks. `mysql` covers MySQL 8 and MariaDB 10.5+. */
export type SqlDialect = 'postgres' | 'mysql';

/** The table name used when none is given. */
export const DEFAULT_INBOX_TABLE = 'idempotency_inbox';

/** Every statement the inbox runs, for one dialect and one table. Parameters are listed per statement. */
export interface InboxStatements {
  /** Creates the table and its expiry index if they do not exist. */
  readonly schema: readonly string[];
  /**
   * Autocommitted before the transaction. Params: scope, key, fencing token, retention in ms. It inserts the
   * row uncommitted with this token, or raises the token of an uncommitted row holding a lower one. A
   * committed row, or one holding a higher token, is left as it is.
   */
  readonly fence: string;
  /**
   * Params: scope, key. Columns: `fencing_token`, `result`, and `committed_at_ms`, which is null until
   * committed and then whole milliseconds since the epoch.
   */
  readonly read: string;
  /**
   * Inside the transaction, last. Params: result as JSON text or null, retention in ms, scope, key, fencing
   * token. It marks the row committed only while it is uncommitted and holds exactly this token. It changes 1
   * row, or 0 when the key already committed or a later claim fenced it. `committed_at` is the database clock
   * when this statement runs, which on PostgreSQL is `clock_timestamp()`, not the transaction's start.
   */
  readonly commit: string;
  /**
   * Params: batch size. Deletes up to that many rows whose `expires_at` passed, oldest first. A row written
   * while the statement waits for its lock is judged by its new `expires_at`, so it is kept.
   */
  readonly deleteExpired: string;
  /**
   * The longest scope and key the table holds, in UTF-8 bytes: each in its column, and both together in the
   * primary key. The inbox refuses longer ones before its first statement. MySQL would refuse them with a
   * driver error the runner retries in strict mode, or truncate them into a row no later statement finds.
   * PostgreSQL refuses a primary key row over its B-tree limit with error 54000, retried in vain.
   */
  readonly maxBytes: { readonly scope: number; readonly key: number; readonly together: number };
  /**
   * Whether the scope and key columns hold U+0000, NUL. True on MySQL, whose columns are `VARBINARY`. False
   * on PostgreSQL, whose `text` refuses it with error 22021, a driver error the runner would retry in vain.
   * The inbox refuses such a scope or key before its first statement.
   */
  readonly allowsNul: boolean;
}

const IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_]{0,62}$/;

/**
 * Validates and quotes a table name, optionally schema-qualified as `schema.table`. On MySQL the schema is
 * the database.
 * @throws {@link @idempotent-consumer/core!InvalidOptionError} when a part is not a plain identifier of
 *   letters, digits and `_`.
 */
export function quoteTable(dialect: SqlDialect, table: string): string {
  const parts = typeof table === 'string' ? table.split('.') : [];
  if (parts.length < 1 || parts.length > 2 || !parts.every((p) => IDENTIFIER.test(p))) {
    throw new InvalidOptionError(
      `table must be an identifier or schema.identifier (letters, digits, _), got ${JSON.stringify(table)}`,
    );
  }
  const q = dialect === 'postgres' ? '"' : '`';
  return parts.map((p) => `${q}${p}${q}`).join('.');
}

/** The longest identifier PostgreSQL keeps whole, truncating longer ones. MySQL's limit is 64. */
const MAX_IDENTIFIER_LENGTH = 63;

/**
 * The name of the expiry index, unqualified and derived from the table's own name.
 * @throws {@link @idempotent-consumer/core!InvalidOptionError} when it is longer than 63 characters, for a
 *   table name over 52. PostgreSQL would truncate it to the table's own name for a 63-character one.
 *   `CREATE INDEX IF NOT EXISTS` would then find that relation and silently create no index. MySQL refuses it
 *   at `createSchema`.
 */
function indexName(table: string): string {
  const name = `${table.split('.').pop()}_expires_at`;
  if (name.length > MAX_IDENTIFIER_LENGTH) {
    throw new InvalidOptionError(
      `table name too long: its expiry index ${JSON.stringify(name)} would exceed ${MAX_IDENTIFIER_LENGTH} characters (at most ${MAX_IDENTIFIER_LENGTH - '_expires_at'.length} for the table name)`,
    );
  }
  return name;
}

/**
 * The statements of one dialect on one table.
 * @throws {@link @idempotent-consumer/core!InvalidOptionError} for an unknown dialect or an invalid table name.
 */
export function inboxStatements(dialect: SqlDialect, table: string = DEFAULT_INBOX_TABLE): InboxStatements {
  if (dialect === 'postgres') return postgresStatements(table);
  if (dialect === 'mysql') return mysqlStatements(table);
  throw new InvalidOptionError(`dialect must be 'postgres' or 'mysql', got ${JSON.stringify(dialect)}`);
}

/**
 * The most UTF-8 bytes scope and key may take together on PostgreSQL: a B-tree entry holds at most 2704
 * bytes on 8 KiB pages, and the primary key's entry spends 8 on its header, 4 on each text's length and up
 * to 3 on alignment. Values it cannot compress below that (random keys) fail with error 54000 ("index row
 * size exceeds btree maximum"); compressible ones fit up to larger sizes, but whether one does depends on its
 * bytes, so none longer is taken. Measured: 2687 to 2691 bytes fitted, never more.
 */
const POSTGRES_KEY_BYTES = 2704 - 8 - 4 - 4 - 3;

function postgresStatements(table: string): InboxStatements {
  const t = quoteTable('postgres', table);
  return {
    schema: [
      `CREATE TABLE IF NOT EXISTS ${t} (
  scope text NOT NULL,
  idempotency_key text NOT NULL,
  fencing_token bigint NOT NULL,
  committed_at timestamptz NULL,
  result text NULL,
  expires_at timestamptz NOT NULL,
  PRIMARY KEY (scope, idempotency_key)
)`,
      `CREATE INDEX IF NOT EXISTS "${indexName(table)}" ON ${t} (expires_at)`,
    ],
    fence: `INSERT INTO ${t} AS i (scope, idempotency_key, fencing_token, expires_at)
VALUES ($1, $2, $3, now() + $4::bigint * interval '1 millisecond')
ON CONFLICT (scope, idempotency_key) DO UPDATE
SET fencing_token = excluded.fencing_token, expires_at = excluded.expires_at
WHERE i.committed_at IS NULL AND i.fencing_token < excluded.fencing_token`,
    // Floor, not the cast's rounding, so the stored milliseconds are never after the time, as MySQL's DIV.
    read: `SELECT fencing_token::text AS fencing_token,
  floor(extract(epoch FROM committed_at) * 1000)::bigint::text AS committed_at_ms, result
FROM ${t} WHERE scope = $1 AND idempotency_key = $2`,
    // clock_timestamp(), not now(). now() is the transaction's start, before the whole effect ran.
    commit: `UPDATE ${t}
SET committed_at = clock_timestamp(), result = $1,
  expires_at = clock_timestamp() + $2::bigint * interval '1 millisecond'
WHERE scope = $3 AND idempotency_key = $4 AND fencing_token = $5 AND committed_at IS NULL`,
    // The outer expires_at test is not redundant. A row the subquery picked and then found locked, because
    // its holder was committing it or a later claim was fencing it, is rechecked on its new version after the
    // wait. At READ COMMITTED that recheck covers only the outer WHERE. With the key alone it would delete
    // the row just committed with a new expiry, and the key would run again.
    deleteExpired: `DELETE FROM ${t} WHERE (scope, idempotency_key) IN (
  SELECT scope, idempotency_key FROM ${t} WHERE expires_at < now() ORDER BY expires_at LIMIT $1
) AND expires_at < now()`,
    maxBytes: { scope: POSTGRES_KEY_BYTES, key: POSTGRES_KEY_BYTES, together: POSTGRES_KEY_BYTES },
    allowsNul: false,
  };
}

function mysqlStatements(table: string): InboxStatements {
  const t = quoteTable('mysql', table);
  // Scope and key are VARBINARY, so they compare byte for byte with trailing spaces, as in Redis. 'A' and
  // 'a', 'k' and 'k ' are two keys. A utf8mb4_bin VARCHAR would not do. That collation pads with spaces on
  // MySQL 8 and MariaDB, so its primary key holds 'k' and 'k ' as one key, and the second message would be
  // reported a duplicate of the first without its effect ever running. The sizes in bytes hold every value
  // the utf8mb4 columns of 191 and 512 characters held, at 4 bytes a character. Together they are 2812 bytes,
  // within InnoDB's 3072-byte key. Times are UTC.
  const expiry = 'TIMESTAMPADD(MICROSECOND, ? * 1000, UTC_TIMESTAMP(3))';
  const raise = 'committed_at IS NULL AND fencing_token < VALUES(fencing_token)';
  return {
    schema: [
      `CREATE TABLE IF NOT EXISTS ${t} (
  scope VARBINARY(764) NOT NULL,
  idempotency_key VARBINARY(2048) NOT NULL,
  fencing_token BIGINT NOT NULL,
  committed_at DATETIME(3) NULL,
  result MEDIUMTEXT NULL,
  expires_at DATETIME(3) NOT NULL,
  PRIMARY KEY (scope, idempotency_key),
  KEY \`${indexName(table)}\` (expires_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin`,
    ],
    // Assignments run left to right on the updated row, so expires_at must be decided before fencing_token.
    fence: `INSERT INTO ${t} (scope, idempotency_key, fencing_token, expires_at)
VALUES (?, ?, ?, ${expiry})
ON DUPLICATE KEY UPDATE
expires_at = IF(${raise}, VALUES(expires_at), expires_at),
fencing_token = IF(${raise}, VALUES(fencing_token), fencing_token)`,
    read: `SELECT CAST(fencing_token AS CHAR) AS fencing_token,
  CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', committed_at) DIV 1000 AS CHAR) AS committed_at_ms,
  result
FROM ${t} WHERE scope = ? AND idempotency_key = ?`,
    commit: `UPDATE ${t}
SET committed_at = UTC_TIMESTAMP(3), result = ?, expires_at = ${expiry}
WHERE scope = ? AND idempotency_key = ? AND fencing_token = ? AND committed_at IS NULL`,
    deleteExpired: `DELETE FROM ${t} WHERE expires_at < UTC_TIMESTAMP(3) ORDER BY expires_at LIMIT ?`,
    maxBytes: { scope: 764, key: 2048, together: 764 + 2048 },
    allowsNul: true,
  };
}

/**
 * The DDL of the inbox table and its expiry index as one script, statements separated by `;`. The migration
 * files under `migrations/` are this script for the default table name.
 */
export function inboxSchemaSql(dialect: SqlDialect, table: string = DEFAULT_INBOX_TABLE): string {
  return `${inboxStatements(dialect, table).schema.join(';\n\n')};\n`;
}
