import { describeInbox } from './fixture';

jest.setTimeout(60_000);

describeInbox('distinct keys stay distinct', (fx) => {
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
});
