/**
 * A consumer process for src/inbox/kill-after-commit.test.ts. The suite compiles this file to JavaScript
 * once and forks it with plain `node` (a hundred process starts per dialect: a TypeScript loader per start
 * would triple the time), so it imports packages only. Talks to the suite over IPC:
 *   worker → {type:'ready'} once Redis and the database answer;
 *   suite  → {type:'run', key} to consume one payment through `Idempotency.run` + the inbox;
 *   worker → {type:'committed', key, fencingToken} right after the database transaction committed, and
 *            before the COMPLETED write to Redis: the suite SIGKILLs it there, in the crash window.
 * Env: INBOX_WORKER_CONFIG (JSON of {@link InboxKillWorkerConfig}).
 */
import { Idempotency, RedisIdempotencyStore } from '@idempotent-consumer/core';
import {
  mysqlClient,
  mysqlTransaction,
  pgClient,
  pgTransaction,
  type RunInTransaction,
  type SqlClient,
  type SqlDialect,
  TransactionalInbox,
} from '@idempotent-consumer/inbox-sql';
import Redis from 'ioredis';

export interface InboxKillWorkerConfig {
  readonly dialect: SqlDialect;
  readonly databaseUrl: string;
  /** The inbox table, `schema.table`. */
  readonly inboxTable: string;
  /** The side effect: an INSERT taking (payment key, fencing token). */
  readonly ledgerInsertSql: string;
  readonly redisUrl: string;
  readonly keyPrefix: string;
  readonly scope: string;
  readonly leaseMs: number;
}

export type InboxKillWorkerMessage =
  | { type: 'ready' }
  | { type: 'committed'; key: string; fencingToken: number }
  | { type: 'error'; message: string };

const config = JSON.parse(process.env.INBOX_WORKER_CONFIG ?? '{}') as InboxKillWorkerConfig;
const send = (message: InboxKillWorkerMessage) => process.send!(message);

async function database(): Promise<{ client: SqlClient; transaction: RunInTransaction }> {
  if (config.dialect === 'postgres') {
    const { Pool } = await import('pg');
    const pool = new Pool({ connectionString: config.databaseUrl, max: 2 });
    return { client: pgClient(pool), transaction: pgTransaction(pool) };
  }
  const mysql = await import('mysql2/promise');
  const pool = mysql.createPool({ uri: config.databaseUrl, connectionLimit: 2 });
  return { client: mysqlClient(pool), transaction: mysqlTransaction(pool) };
}

async function main(): Promise<void> {
  const redis = new Redis(config.redisUrl);
  const db = await database();
  const idempotency = new Idempotency(
    { store: new RedisIdempotencyStore({ redis }, { keyPrefix: config.keyPrefix }) },
    { leaseMs: config.leaseMs },
  );
  let running: { key: string; fencingToken: number } | undefined;
  // The database transaction as the inbox runs it, plus the crash: report the commit, then hang.
  const transaction: RunInTransaction = async (body) => {
    await db.transaction(body);
    send({ type: 'committed', ...running! });
    return new Promise<never>(() => {}); // SIGKILLed here: committed, COMPLETED never written
  };
  const inbox = new TransactionalInbox({
    dialect: config.dialect,
    client: db.client,
    transaction,
    table: config.inboxTable,
  });
  await redis.ping();
  await db.client.query('SELECT 1', []);
  process.on('message', (message: { type: string; key: string }) => {
    if (message.type !== 'run') return;
    idempotency
      .run({ scope: config.scope, key: message.key }, (ctx) => {
        running = { key: ctx.key, fencingToken: ctx.fencingToken };
        return inbox.run(ctx, (tx) => tx.query(config.ledgerInsertSql, [ctx.key, ctx.fencingToken]));
      })
      .catch((error: unknown) => send({ type: 'error', message: String(error) }));
  });
  send({ type: 'ready' });
}

main().catch((error: unknown) => {
  send({ type: 'error', message: String(error) });
  process.exit(1);
});
