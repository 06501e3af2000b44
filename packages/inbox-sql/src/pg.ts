import { TransactionLostError } from './errors';
import type { RunInTransaction, SqlClient } from './sql-client';

/**
 * The part of a `pg` `Pool`, `PoolClient` or `Client` the inbox uses (structural, so `pg` stays an
 * optional peer dependency).
 */
export interface PgQueryable {
  query(
    text: string,
    values?: unknown[],
  ): Promise<{
    rows: Record<string, unknown>[];
    rowCount: number | null;
    /** The command tag (pg's `command`): `COMMIT`, or `ROLLBACK` for a `COMMIT` of a failed transaction. */
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
 * Adapts a `pg` `Pool`, `PoolClient` or `Client` (or anything with pg's `query(text, values)` and
 * `{ rows, rowCount }` result, such as Knex's `trx.raw` result on PostgreSQL) to a {@link SqlClient}.
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
 * A {@link RunInTransaction} on a `pg` `Pool`: checks out a client, `BEGIN`, runs the body, `COMMIT`
 * (or `ROLLBACK` and rethrow), and releases the client (destroying it when the rollback failed, so a
 * broken connection never goes back to the pool). While checked out, the client's `error` event (its
 * server connection ended) is listened to, so a dying connection rejects the running statement instead
 * of crashing the process, and the client is destroyed on release. A `COMMIT` that fails rejects: whether it took effect
 * is then unknown, which the inbox resolves on the next attempt (the row is there or it is not).
 * @throws `TransactionLostError` (retryable) when PostgreSQL answered `COMMIT` with `ROLLBACK`: a statement
 *   of the transaction had failed (the body caught its error) and nothing was committed; the body's value
 *   is not returned. Whatever `BEGIN`, the body, or `COMMIT` threw.
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
        // A COMMIT of a failed transaction (a statement's error caught) rolls back without an error.
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
