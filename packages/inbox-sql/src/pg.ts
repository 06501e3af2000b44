import { TransactionLostError } from './errors';
import type { RunInTransaction, SqlClient } from './sql-client';

/**
 * The part of a `pg` `Pool`, `PoolClient` or `Client` the inbox uses. It is structural, so `pg` stays an
 * optional peer dependency.
 */
export interface PgQueryable {
  query(
    text: string,
    values?: unknown[],
  ): Promise<{
    rows: Record<string, unknown>[];
    rowCount: number | null;
    /** pg's `command` tag: `COMMIT`, or `ROLLBACK` for a `COMMIT` of a failed transaction. */
    command?: string;
  }>;
}

/** The part of a `pg` `Pool` that {@link pgTransaction} uses. */
export interface PgPool {
  connect(): Promise<
    PgQueryable & {
      release(destroy?: boolean | Error): void;
      on(event: 'error', listener: (error: Error) => void): unknown;
      off(event: 'error', listener: (error: Error) => void): unknown;
    }
  >;
}

/**
 * Adapts a `pg` `Pool`, `PoolClient` or `Client` to a {@link SqlClient}. Anything with pg's
 * `query(text, values)` and a `{ rows, rowCount }` result fits, such as Knex's `trx.raw` on PostgreSQL.
 */
export function pgClient(queryable: PgQueryable): SqlClient {
  return {
    async query(sql, params) {
      const result = await queryable.query(sql, [...params]);
      return { rows: result.rows, rowCount: result.rowCount ?? 0 };
    },
  };
}

/**
 * A {@link RunInTransaction} on a `pg` `Pool`. It checks out a client, sends `BEGIN`, runs the body and sends
 * `COMMIT`, or `ROLLBACK` and rethrows. Then it releases the client, or destroys it when the rollback failed,
 * so a broken connection never goes back to the pool. While the client is checked out its `error` event is
 * listened to. A dying connection then rejects the running statement instead of crashing the process, and the
 * client is destroyed on release. A failed `COMMIT` rejects. Whether it took effect is then unknown, and the
 * inbox finds out on the next attempt from whether the row is there.
 * @throws `TransactionLostError`, retryable, when PostgreSQL answered `COMMIT` with `ROLLBACK`. A statement
 *   had failed and the body caught its error, so nothing was committed and the body's value is not returned.
 * @throws whatever `BEGIN`, the body or `COMMIT` threw.
 */
export function pgTransaction(pool: PgPool): RunInTransaction {
  return async (body) => {
    const client = await pool.connect();
    let broken: Error | undefined;
    const onError = (error: Error) => {
      broken = error;
    };
    client.on('error', onError);
    try {
      await client.query('BEGIN');
      try {
        const result = await body(pgClient(client));
        const { command } = await client.query('COMMIT');
        // A COMMIT of a failed transaction, whose statement error was caught, rolls back without an error.
        if (command === 'ROLLBACK') {
          throw new TransactionLostError(
            'PostgreSQL answered COMMIT with ROLLBACK: a statement of the transaction had failed and the body resolved anyway; nothing was committed',
          );
        }
        return result;
      } catch (error) {
        await client.query('ROLLBACK').catch((rollbackError: unknown) => {
          broken = rollbackError instanceof Error ? rollbackError : new Error(String(rollbackError));
        });
        throw error;
      }
    } finally {
      client.off('error', onError);
      client.release(broken);
    }
  };
}
