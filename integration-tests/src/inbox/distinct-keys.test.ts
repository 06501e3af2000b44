import { randomBytes } from 'node:crypto';
import { defaultIsRetryable, InvalidKeyError } from '@idempotent-consumer/core';
import {
  mysqlClient,
  type RunInTransaction,
  type SqlClient,
  TransactionalInbox,
} from '@idempotent-consumer/inbox-sql';
import { describeInbox } from './fixture';

jest.setTimeout(60_000);

describeInbox('distinct keys stay distinct', (fx, dialect) => {
  it('keys that differ only by trailing spaces are separate messages: each one writes once', async () => {
    const { db, scope } = fx();
    const runner = fx().idempotency({ leaseMs: 5000 });
    // Redis (and the core's key check) treat these as three keys; so must the inbox's primary key.
    // A PAD SPACE comparison (MySQL/MariaDB utf8mb4_bin) would make the second and third duplicates of
    // the first: their payments would never be written.
    const keys = ['trailing-1', 'trailing-1 ', 'trailing-1  '];
    const handler = db.inbox().handler(async (tx, ctx) => {
      await db.writeLedger(tx, ctx.key, ctx.fencingToken);
      return { paid: ctx.key };
    });
    const results = [];
    for (const key of keys) results.push(await runner.run({ scope, key }, handler));
    expect(results.map((r) => ('status' in r ? `${r.outcome}/${r.status}` : r.outcome))).toEqual(
      keys.map(() => 'ACQUIRED/completed'),
    );
    expect(results.map((r) => (r as { result: unknown }).result)).toEqual(keys.map((key) => ({ paid: key })));
    for (const key of keys) {
      expect(await db.inbox().read({ scope, key })).toMatchObject({ result: JSON.stringify({ paid: key }) });
    }
    // Three ledger rows (summed: a PAD SPACE ledger column may group the three keys as one).
    const ledger = await db.ledger();
    const rows = Object.entries(ledger).filter(([k]) => k.startsWith('trailing-1'));
    expect(rows.reduce((n, [, count]) => n + count, 0)).toBe(keys.length);
  });

  /** Two keys of 2100 bytes that differ only past byte 2048 (the MySQL key column's size). */
  const longKeys = (name: string) => [`${'x'.repeat(2090)}-${name}-a`, `${'x'.repeat(2090)}-${name}-b`];

  it('a key longer than its column is refused with InvalidKeyError (PostgreSQL: it fits), before any write', async () => {
    const { dialect, db, scope } = fx();
    const inbox = db.inbox();
    let effects = 0;
    for (const [i, key] of longKeys('strict').entries()) {
      const run = inbox.run({ scope, key, fencingToken: i + 1 }, async () => ++effects);
      if (dialect === 'postgres') await expect(run).resolves.toMatchObject({ status: 'committed' });
      else await expect(run).rejects.toThrow(InvalidKeyError);
    }
    expect(effects).toBe(dialect === 'postgres' ? 2 : 0);
  });

  // Only on MySQL/MariaDB: PostgreSQL has no non-strict mode: text is never truncated.
  if (dialect === 'mysql') {
    it('MySQL without strict mode: a key longer than its column is refused, not truncated into another key', async () => {
      const { dialect, databaseUrl, db, scope } = fx();
      // One connection whose session truncates over-long values with a warning (sql_mode without
      // STRICT_*), as on servers configured that way: the inbox must not depend on the server's mode.
      const mysql = await import('mysql2/promise');
      const connection = await mysql.createConnection({ uri: databaseUrl });
      try {
        await connection.query("SET SESSION sql_mode = ''");
        const client = mysqlClient(connection);
        const transaction: RunInTransaction = async (body) => {
          await connection.beginTransaction();
          try {
            const result = await body(client);
            await connection.commit();
            return result;
          } catch (error) {
            await connection.rollback();
            throw error;
          }
        };
        const inbox = new TransactionalInbox({
          dialect,
          client,
          transaction,
          table: `${db.schema}.idempotency_inbox`,
        });
        const outcomes: string[] = [];
        for (const [i, key] of longKeys('lax').entries()) {
          try {
            outcomes.push((await inbox.run({ scope, key, fencingToken: i + 1 }, async () => key)).status);
          } catch (error) {
            outcomes.push((error as Error).name);
          }
        }
        // Truncated, the fenced row is stored under the first 2048 bytes, and the run's reads and commit,
        // comparing the whole key, never find it: LeaseLostError ('vanished') on this and every retry.
        expect(outcomes).toEqual(['InvalidKeyError', 'InvalidKeyError']);
      } finally {
        await connection.end();
      }
    });
  }
});

describeInbox('keys the database cannot store as they are', (fx) => {
  it('scope and key longer together than the primary key holds: InvalidKeyError before any statement (PostgreSQL: error 54000 retried in vain)', async () => {
    const { dialect, db } = fx();
    const statements: string[] = [];
    const client: SqlClient = {
      query: (sql, params) => {
        statements.push(sql);
        return db.client.query(sql, params);
      },
    };
    const transaction: RunInTransaction = (body) => {
      statements.push('BEGIN');
      return db.transaction(body);
    };
    const inbox = db.inbox({ client, transaction });
    // Random bytes as hex: nothing the database can compress to fit.
    const random = (bytes: number) =>
      randomBytes(Math.ceil(bytes / 2))
        .toString('hex')
        .slice(0, bytes);
    const scope = random(40);
    let effects = 0;
    const run = (key: string, fencingToken: number) =>
      inbox.run({ scope, key, fencingToken }, async () => ++effects);
    const error = await run(random(3000), 1).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(InvalidKeyError);
    expect(defaultIsRetryable(error)).toBe(false);
    expect(statements).toEqual([]);
    expect(effects).toBe(0);
    if (dialect === 'postgres') {
      // The longest that fits: 2685 bytes together; one more is refused before the database sees it.
      await expect(run(random(2685 - 40), 2)).resolves.toEqual({ status: 'committed', result: 1 });
      statements.length = 0;
      await expect(run(random(2686 - 40), 3)).rejects.toThrow(
        /are 2686 bytes long together; the inbox table's primary key holds at most 2685 bytes$/,
      );
      expect(statements).toEqual([]);
    }
  });

  it('a key or scope with a NUL character: InvalidKeyError (not retryable) on PostgreSQL, a key of its own on MySQL', async () => {
    const { dialect, db, scope } = fx();
    const inbox = db.inbox();
    let effects = 0;
    // The core accepts NUL (Redis keys are binary); PostgreSQL text cannot hold it and refuses the fence
    // with 22021, an error the runner would retry until maxAttempts.
    const ids = [
      { scope, key: 'nul-\0-a' },
      { scope, key: 'nul-\0-b' },
      { scope: `${scope}\0x`, key: 'nul-scope' },
    ];
    for (const [i, id] of ids.entries()) {
      const run = inbox.run({ ...id, fencingToken: i + 1 }, async (tx) => {
        await db.writeLedger(tx, id.key, i + 1);
        return ++effects;
      });
      if (dialect === 'postgres') {
        const error = await run.then(
          () => undefined,
          (e: unknown) => e,
        );
        expect(error).toBeInstanceOf(InvalidKeyError);
        expect(defaultIsRetryable(error)).toBe(false);
      } else {
        await expect(run).resolves.toEqual({ status: 'committed', result: i + 1 });
      }
    }
    expect(effects).toBe(dialect === 'postgres' ? 0 : ids.length);
  });

  it('a key with a lone surrogate is refused on both databases, not stored as U+FFFD under another key', async () => {
    const { db, scope } = fx();
    const inbox = db.inbox();
    let effects = 0;
    // Both drivers encode a lone surrogate as U+FFFD: '\uD800' and '\uDC00' (and '\uFFFD') would be one row,
    // and the second message would be reported a duplicate of the first without its effect running.
    const outcomes: string[] = [];
    for (const [i, key] of ['lone-\uD800', 'lone-\uDC00'].entries()) {
      try {
        outcomes.push((await inbox.run({ scope, key, fencingToken: i + 1 }, async () => ++effects)).status);
      } catch (error) {
        outcomes.push((error as Error).name);
      }
    }
    expect(outcomes).toEqual(['InvalidKeyError', 'InvalidKeyError']);
    await expect(
      inbox.run({ scope: `${scope}-\uDBFF`, key: 'lone-scope', fencingToken: 1 }, async () => ++effects),
    ).rejects.toThrow(InvalidKeyError);
    expect(effects).toBe(0);
  });
});
