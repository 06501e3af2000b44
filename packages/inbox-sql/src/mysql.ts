import type { RunInTransaction, SqlClient } from './sql-client';

/**
 * The part of a `mysql2/promise` `Pool`, `PoolConnection` or `Connection` the inbox uses. It is structural,
 * so `mysql2` stays an optional peer dependency. `query` resolves `[rows, fields]` for a `SELECT` and
 * `[{ affectedRows }, undefined]` for other statements.
 */
export interface MysqlQueryable {
  query(sql: string, values?: unknown[]): Promise<[unknown, unknown]>;
}

/** The part of a `mysql2/promise` `Pool` that {@link mysqlTransaction} uses. */
export interface MysqlPool {
  getConnection(): Promise<
    MysqlQueryable & {
      beginTransaction(): Promise<void>;
      commit(): Promise<void>;
      rollback(): Promise<void>;
      release(): void;
      destroy(): void;
    }
  >;
}

/** Adapts a `mysql2/promise` `Pool`, `PoolConnection` or `Connection` to a {@link SqlClient}. */
export function mysqlClient(queryable: MysqlQueryable): SqlClient {
  return {
    async query(sql, params) {
      const [result] = await queryable.query(sql, [...params]);
      if (Array.isArray(result))
        return { rows: result as Record<string, unknown>[], rowCount: result.length };
      return { rows: [], rowCount: Number((result as { affectedRows?: number }).affectedRows ?? 0) };
    },
  };
}

/**
 * A {@link RunInTransaction} on a `mysql2/promise` `Pool`. It gets a connection, calls `beginTransaction`,
 * runs the body and calls `commit`, or `rollback` and rethrows. Then it releases the connection, or destroys
 * it when the rollback failed. A failed `commit` rejects. Whether it took effect is then unknown, and the
 * inbox finds out on the next attempt.
 */
export function mysqlTransaction(pool: MysqlPool): RunInTransaction {
  return async (body) => {
    const connection = await pool.getConnection();
    let broken = false;
    try {
      await connection.beginTransaction();
      try {
        const result = await body(mysqlClient(connection));
        await connection.commit();
        return result;
      } catch (error) {
        await connection.rollback().catch(() => {
          broken = true;
        });
        throw error;
      }
    } finally {
      if (broken) connection.destroy();
      else connection.release();
    }
  };
}
