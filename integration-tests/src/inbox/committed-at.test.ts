import { describeInbox } from './fixture';

jest.setTimeout(60_000);

describeInbox('committedAtMs', (fx, dialect) => {
  /** The database clock now, in whole ms since the epoch, read by a statement inside the transaction. */
  const clockMsSql = (dialect: string) =>
    dialect === 'postgres'
      ? 'SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint::text AS ms'
      : "SELECT CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(3)) DIV 1000 AS CHAR) AS ms";

  it('is the time of the commit statement, not the start of a transaction whose effect took a while', async () => {
    const { dialect, db, scope } = fx();
    const inbox = db.inbox();
    const key = 'slow-effect';
    let lastEffectStatementMs = 0;
    const committed = await inbox.run({ scope, key, fencingToken: 1 }, async (tx) => {
      await db.writeLedger(tx, key, 1);
      // The effect spends 200 ms in the database, then reads the clock as its last statement.
      await tx.query(dialect === 'postgres' ? 'SELECT pg_sleep(0.2)' : 'SELECT SLEEP(0.2)', []);
      lastEffectStatementMs = Number((await tx.query(clockMsSql(dialect), [])).rows[0]?.ms);
      return 'done';
    });
    expect(committed.status).toBe('committed');
    const row = await inbox.read({ scope, key });
    // Before (PostgreSQL): now(), the transaction's start, over 200 ms before the effect's last statement.
    expect(row?.committedAtMs).toBeGreaterThanOrEqual(lastEffectStatementMs);
    const duplicate = await inbox.run({ scope, key, fencingToken: 2 }, async () => 'again');
    expect(duplicate).toMatchObject({ status: 'duplicate', committedAtMs: row?.committedAtMs });
  });

  // Only on PostgreSQL: DATETIME(3) holds whole milliseconds.
  if (dialect === 'postgres') {
    it('is floored to the millisecond, as on MySQL (PostgreSQL keeps microseconds)', async () => {
      const { db, scope } = fx();
      const inbox = db.inbox();
      const key = 'sub-millisecond';
      await inbox.run({ scope, key, fencingToken: 1 }, async () => 'done');
      // 2026-01-01T00:00:00.000900Z: still in its first millisecond.
      await db.client.query(
        `UPDATE ${db.schema}.idempotency_inbox SET committed_at = to_timestamp(1767225600.0009) WHERE scope = $1 AND idempotency_key = $2`,
        [scope, key],
      );
      // Before: 1767225600001 (rounded), a time after the commit.
      expect(await inbox.read({ scope, key })).toMatchObject({ committedAtMs: 1767225600000 });
    });
  }
});
