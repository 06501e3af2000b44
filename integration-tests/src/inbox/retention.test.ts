import { describeInbox, gate } from './fixture';

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

// PostgreSQL only: at READ COMMITTED a DELETE that waited for a row lock rechecks only its own WHERE on the
// new row version, which is where the defect was; InnoDB locks the rows it reads, so MySQL kept the row.
describeInbox(
  'cleanup racing a commit',
  (fx) => {
    it('a row committed while the cleanup waits for its lock is kept: its new expiry is checked, not the old one', async () => {
      const { db, scope } = fx();
      const table = `${db.schema}.idempotency_inbox`;
      const inbox = db.inbox();
      const ctx = { scope, key: 'committed-during-cleanup', fencingToken: 1 };
      // Fenced with a retention of 1 ms: expired by the time its holder commits (a holder slower than the
      // retention, or a row of a dead holder that a later claim fenced again while the cleanup ran).
      await expect(db.inbox({ retentionMs: 1 }).fence(ctx)).resolves.toEqual({ status: 'proceed' });
      await until('the fenced row expired', async () => {
        const { rows } = await db.client.query(
          `SELECT COUNT(*) AS n FROM ${table} WHERE idempotency_key = $1 AND expires_at < now()`,
          [ctx.key],
        );
        return Number(rows[0]?.n) === 1;
      });
      const marked = gate();
      const release = gate();
      const holder = db.transaction(async (tx) => {
        // Committed with the inbox's retention (7 days): holds the row lock until the transaction commits.
        expect(await inbox.commit(tx, ctx, 'kept')).toBe(true);
        marked.open();
        await release.promise;
      });
      await marked.promise;
      const cleanup = inbox.deleteExpired();
      // The cleanup saw the expired version and waits for the holder's lock on it.
      const waiting = `SELECT COUNT(*) AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE 'DELETE FROM "${db.schema}"%'`;
      await until('the cleanup waiting for the row lock', async () => {
        const { rows } = await db.client.query(waiting, []);
        return Number(rows[0]?.n) === 1;
      }).finally(() => release.open()); // a failed wait still lets the holder commit
      await holder;
      await cleanup;
      // Before (PostgreSQL): the cleanup rechecked only its join on the key, deleted the committed row, and a
      // redelivery of the key would have run its effect again.
      expect(await inbox.read(ctx)).toMatchObject({ fencingToken: 1, result: '"kept"' });
    });
  },
  { dialects: ['postgres'] },
);

/** Polls `check` until it holds, failing after 15 s with what it waited for (no test hangs to Jest's limit). */
async function until(what: string, check: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + 15_000;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}
