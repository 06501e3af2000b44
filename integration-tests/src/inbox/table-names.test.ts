import { InvalidOptionError } from '@idempotent-consumer/core';
import { describeInbox } from './fixture';

jest.setTimeout(60_000);

describeInbox('table names', (fx) => {
  /** The names of the indexes the database holds on `table` of this suite's schema. */
  async function indexesOf(table: string): Promise<string[]> {
    const { dialect, db } = fx();
    const { rows } = await db.client.query(
      dialect === 'postgres'
        ? 'SELECT indexname AS name FROM pg_indexes WHERE schemaname = $1 AND tablename = $2'
        : 'SELECT DISTINCT INDEX_NAME AS name FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?',
      [db.schema, table],
    );
    return rows.map((r) => String(r.name)).sort();
  }

  it('a table name too long for its expiry index is refused up front, not created without the index', async () => {
    const { db } = fx();
    // 63 characters: a valid identifier, but `<table>_expires_at` is 74. PostgreSQL truncates that to 63,
    // which is the table's own name, so CREATE INDEX IF NOT EXISTS skips it (a NOTICE) and the cleanup has
    // no index; MySQL refuses an index name over 64 characters (ER_TOO_LONG_IDENT) at createSchema.
    const table = 't'.repeat(63);
    const outcome = await (async () => {
      await db.inbox({ table: `${db.schema}.${table}` }).createSchema();
      return indexesOf(table);
    })().catch((error: unknown) => error);
    expect(outcome).toBeInstanceOf(InvalidOptionError);
  });

  it('the longest accepted table name gets its expiry index', async () => {
    const table = 'n'.repeat(52);
    await fx()
      .db.inbox({ table: `${fx().db.schema}.${table}` })
      .createSchema();
    expect(await indexesOf(table)).toContain(`${table}_expires_at`);
  });
});
