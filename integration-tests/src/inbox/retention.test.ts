import { describeInbox } from './fixture';

jest.setTimeout(60_000);

describeInbox('retention and cleanup', (fx) => {
  it('deleteExpired removes only rows past their retention', async () => {
    const { db, scope } = fx();
    const shortLived = db.inbox({ retentionMs: 1 });
    const kept = db.inbox();
    for (let i = 0; i < 5; i++) {
      await shortLived.run({ scope, key: `short-${i}`, fencingToken: 1 }, async () => i);
      await kept.run({ scope, key: `kept-${i}`, fencingToken: 1 }, async () => i);
    }
    // The database clock decides expiry (1 ms after the commit); wait for it by asking, not by sleeping.
    let deleted = 0;
    const deadline = Date.now() + 10_000;
    while (deleted < 5 && Date.now() < deadline) deleted += await kept.deleteExpired({ batchSize: 2 });
    expect(deleted).toBe(5);
    expect(await kept.read({ scope, key: 'short-0' })).toBeUndefined();
    expect(await kept.read({ scope, key: 'kept-0' })).toMatchObject({ fencingToken: 1, result: '0' });
  });

  it('the cleanup statement finds expired rows through the expires_at index', async () => {
    const { dialect, db } = fx();
    const inbox = db.inbox();
    const table = `${db.schema}.idempotency_inbox`;
    // Enough rows that a sequential scan is not the obvious plan.
    if (dialect === 'postgres') {
      await db.client.query(
        `INSERT INTO ${table} (scope, idempotency_key, fencing_token, expires_at)
         SELECT 'bulk', 'k' || g, 1, now() + interval '1 day' + g * interval '1 second' FROM generate_series(1, 20000) g`,
        [],
      );
      await db.client.query(`ANALYZE ${table}`, []);
      const plan = await db.client.query(
        `EXPLAIN ${inbox.statements.deleteExpired.replace('$1', '1000')}`,
        [],
      );
      expect(plan.rows.map((r) => String(r['QUERY PLAN'])).join('\n')).toContain(
        'idempotency_inbox_expires_at',
      );
    } else {
      await db.client.query(
        `INSERT INTO ${table} (scope, idempotency_key, fencing_token, expires_at)
         SELECT 'bulk', CONCAT('k', seq), 1, UTC_TIMESTAMP(3) + INTERVAL 1 DAY + INTERVAL seq SECOND FROM seq_1_to_20000`,
        [],
      );
      await db.client.query(`ANALYZE TABLE ${table}`, []);
      const plan = await db.client.query(
        `EXPLAIN ${inbox.statements.deleteExpired.replace('?', '1000')}`,
        [],
      );
      expect(plan.rows[0]).toMatchObject({ key: 'idempotency_inbox_expires_at' });
    }
  });
});
