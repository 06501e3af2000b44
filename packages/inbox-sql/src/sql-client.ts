/**
 * The one shape the inbox talks to a database through, a function that runs one SQL statement with positional
 * parameters. Drivers, query builders and ORMs are adapted to it in a line or two by `pgClient`,
 * `mysqlClient` or the README's recipes for Kysely, Knex, Prisma and Drizzle. So the inbox never wraps an
 * ORM. It runs its two statements on the transaction the ORM opened.
 */

/** What one statement returned. */
export interface SqlResult {
  /** Rows of a `SELECT`, empty for other statements. */
  readonly rows: readonly Record<string, unknown>[];
  /** Rows an `INSERT`, `UPDATE` or `DELETE` changed. Any number for a `SELECT`. */
  readonly rowCount: number;
}

/**
 * Runs one SQL statement. `sql` uses the dialect's placeholders, `$1, $2…` on PostgreSQL and `?` on MySQL.
 * `params` are the values in order: strings, numbers or `null`. Rejects with the driver's error.
 */
export interface SqlClient {
  query(sql: string, params: readonly unknown[]): Promise<SqlResult>;
}

/**
 * Runs `body` inside one database transaction on a {@link SqlClient} bound to it. It commits when `body`
 * resolves, and rolls back and rethrows when it rejects. `pgTransaction` and `mysqlTransaction` build one
 * from a pool. With an ORM it is the ORM's own transaction call, for example with Kysely
 * `(body) => db.transaction().execute((trx) => body(kyselyClient(trx)))`.
 */
export type RunInTransaction = <R>(body: (tx: SqlClient) => Promise<R>) => Promise<R>;
