/**
 * The one shape the inbox talks to a database through: a function that runs one SQL statement with
 * positional parameters. Drivers, query builders and ORMs are adapted to it in a line or two (see
 * `pgClient`, `mysqlClient`, and the README for Kysely, Knex, Prisma and Drizzle), so the inbox never
 * wraps an ORM: it runs its two statements on the transaction the ORM opened.
 */

/** What one statement returned. */
export interface SqlResult {
  /** Rows of a `SELECT` (empty for other statements). */
  readonly rows: readonly Record<string, unknown>[];
  /** Rows an `INSERT`/`UPDATE`/`DELETE` changed (for a `SELECT`, any number). */
  readonly rowCount: number;
}

/**
 * Runs one SQL statement. `sql` uses the dialect's placeholders (`$1, $2…` on PostgreSQL, `?` on MySQL);
 * `params` are the values in order (strings, numbers, `null`). Rejects with the driver's error.
 */
export interface SqlClient {
  query(sql: string, params: readonly unknown[]): Promise<SqlResult>;
}

/**
 * Runs `body` inside one database transaction on a {@link SqlClient} bound to it: commits when `body`
 * resolves, rolls back and rethrows when it rejects. `pgTransaction` and `mysqlTransaction` build one
 * from a pool; with an ORM it is its own transaction call, for example with Kysely:
 * `(body) => db.transaction().execute((trx) => body(kyselyClient(trx)))`.
 */
export type RunInTransaction = <R>(body: (tx: SqlClient) => Promise<R>) => Promise<R>;
