import { randomBytes } from 'node:crypto';
import {
  mysqlClient,
  mysqlTransaction,
  pgClient,
  pgTransaction,
  type RunInTransaction,
  type SqlClient,
  type SqlDialect,
  TransactionalInbox,
  type TransactionalInboxOptions,
} from '@idempotent-consumer/inbox-sql';
import type { Pool as MysqlPool } from 'mysql2/promise';
import type { Pool as PgPool } from 'pg';

/**
 * One suite's private corner of a real database: a schema (PostgreSQL) or a database (MySQL/MariaDB)
 * named `inbox_it_<random>`, created by {@link SqlDatabase.create} and dropped by `drop`, holding the
 * inbox table and a `ledger` table. The ledger has no unique constraint on purpose: a second write of a
 * payment shows up as a second row, so the tests can count double writes.
 */
export class SqlDatabase {
  readonly client: SqlClient;
  readonly transaction: RunInTransaction;
  readonly #end: () => Promise<void>;

  private constructor(
    readonly dialect: SqlDialect,
    readonly url: string,
    readonly schema: string,
    pool: { client: SqlClient; transaction: RunInTransaction; end(): Promise<void> },
  ) {
    this.client = pool.client;
    this.transaction = pool.transaction;
    this.#end = pool.end;
  }

  /** Creates a fresh schema/database with the inbox and ledger tables. */
  static async create(dialect: SqlDialect, url: string): Promise<SqlDatabase> {
    const schema = `inbox_it_${randomBytes(5).toString('hex')}`;
    const admin = await SqlDatabase.#pool(dialect, url, 2);
    try {
      await admin.client.query(
        dialect === 'postgres' ? `CREATE SCHEMA ${schema}` : `CREATE DATABASE ${schema}`,
        [],
      );
    } finally {
      await admin.end();
    }
    const db = await SqlDatabase.attach(dialect, url, schema);
    await db.inbox().createSchema();
    await db.client.query(
      dialect === 'postgres'
        ? `CREATE TABLE ${schema}.ledger (id bigserial PRIMARY KEY, payment_key text NOT NULL, fencing_token bigint NOT NULL)`
        : `CREATE TABLE ${schema}.ledger (id BIGINT AUTO_INCREMENT PRIMARY KEY, payment_key VARCHAR(512) NOT NULL, fencing_token BIGINT NOT NULL) ENGINE=InnoDB`,
      [],
    );
    return db;
  }

  /** Opens a pool on a schema another process created (a worker process). */
  static async attach(
    dialect: SqlDialect,
    url: string,
    schema: string,
    connections = 8,
  ): Promise<SqlDatabase> {
    return new SqlDatabase(dialect, url, schema, await SqlDatabase.#pool(dialect, url, connections));
  }

  static async #pool(dialect: SqlDialect, url: string, connections: number) {
    if (dialect === 'postgres') {
      const { Pool } = await import('pg');
      const pool: PgPool = new Pool({
        connectionString: url,
        max: connections,
        // pg-pool counts the wait for a free pooled client against this too: racing tests queue many runs
        // on `connections` clients, and on a busy machine that wait passed 5 s. A server that is down
        // refuses at once (the database-down suite), so the margin costs nothing there.
        connectionTimeoutMillis: 30_000,
      });
      pool.on('error', () => {}); // an idle client whose server connection ended; the pool replaces it
      return { client: pgClient(pool), transaction: pgTransaction(pool), end: () => pool.end() };
    }
    const mysql = await import('mysql2/promise');
    const pool: MysqlPool = mysql.createPool({
      uri: url,
      connectionLimit: connections,
      connectTimeout: 5000,
    });
    return { client: mysqlClient(pool), transaction: mysqlTransaction(pool), end: () => pool.end() };
  }

  /** The inbox on this schema's table. */
  inbox(options: Partial<TransactionalInboxOptions> = {}): TransactionalInbox {
    return new TransactionalInbox({
      dialect: this.dialect,
      client: this.client,
      transaction: this.transaction,
      table: `${this.schema}.idempotency_inbox`,
      ...options,
    });
  }

  /** The ledger's INSERT; params: payment key, fencing token. */
  get ledgerInsertSql(): string {
    return `INSERT INTO ${this.schema}.ledger (payment_key, fencing_token) VALUES (${this.#params(2)})`;
  }

  /** The side effect of the tests: one ledger row for `paymentKey`, written with the claim's token. */
  async writeLedger(tx: SqlClient, paymentKey: string, fencingToken: number): Promise<void> {
    await tx.query(this.ledgerInsertSql, [paymentKey, fencingToken]);
  }

  /** Ledger rows per payment key (committed rows only). */
  async ledger(): Promise<Record<string, number>> {
    const { rows } = await this.client.query(
      `SELECT payment_key, COUNT(*) AS n FROM ${this.schema}.ledger GROUP BY payment_key`,
      [],
    );
    return Object.fromEntries(rows.map((r) => [String(r.payment_key), Number(r.n)]));
  }

  /** The fencing tokens of a payment's committed ledger rows. */
  async ledgerTokens(paymentKey: string): Promise<number[]> {
    const { rows } = await this.client.query(
      `SELECT fencing_token FROM ${this.schema}.ledger WHERE payment_key = ${this.#params(1)} ORDER BY id`,
      [paymentKey],
    );
    return rows.map((r) => Number(r.fencing_token));
  }

  /** Placeholders `$1, $2…` or `?, ?…`. */
  #params(n: number): string {
    return Array.from({ length: n }, (_, i) => (this.dialect === 'postgres' ? `$${i + 1}` : '?')).join(', ');
  }

  /** Closes the pool (the schema stays). */
  close(): Promise<void> {
    return this.#end();
  }

  /** Drops the schema/database and closes the pool. */
  async drop(): Promise<void> {
    await this.client
      .query(
        this.dialect === 'postgres'
          ? `DROP SCHEMA IF EXISTS ${this.schema} CASCADE`
          : `DROP DATABASE IF EXISTS ${this.schema}`,
        [],
      )
      .finally(() => this.#end());
  }
}

/** The dialects the inbox suites run on; each is also the name of the service it needs. */
export const DIALECTS: readonly SqlDialect[] = ['postgres', 'mysql'];

/**
 * Registers the hooks that give a suite its own {@link SqlDatabase} of `dialect` at `url`: created before
 * the suite's tests, dropped after them. Returns a reader of it, which throws before the suite started.
 * Call it in a `describe` body.
 */
export function useSqlDatabase(dialect: SqlDialect, url: string): () => SqlDatabase {
  let db: SqlDatabase | undefined;
  beforeAll(async () => {
    db = await SqlDatabase.create(dialect, url);
  });
  afterAll(async () => {
    await db?.drop();
  });
  return () => {
    if (db === undefined) throw new Error(`useSqlDatabase: no ${dialect} database before the suite started`);
    return db;
  };
}
