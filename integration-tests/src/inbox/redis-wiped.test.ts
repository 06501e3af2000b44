import { describeInbox } from './fixture';

jest.setTimeout(60_000);

describeInbox('Redis wiped', (fx) => {
  it('after COMPLETED: the redelivery claims afresh, the inbox finds the row, no second write', async () => {
    const { db, scope } = fx();
    const runner = fx().idempotency({ leaseMs: 5000 });
    let effects = 0;
    const handler = db.inbox().handler(async (tx, ctx) => {
      effects++;
      await db.writeLedger(tx, ctx.key, ctx.fencingToken);
      return { chargedWithToken: ctx.fencingToken };
    });
    const keys = Array.from({ length: 20 }, (_, i) => `wiped-${i}`);
    const first = await Promise.all(keys.map((key) => runner.run({ scope, key }, handler)));
    expect(first.map((r) => r.outcome)).toEqual(keys.map(() => 'ACQUIRED'));

    await fx().wipeRedis(); // this suite's keys only: the records, attempts and tokens are gone
    expect(await fx().redis.keys(`${fx().keyPrefix}*`)).toEqual([]);

    const second = await Promise.all(keys.map((key) => runner.run({ scope, key }, handler)));
    // A fresh claim (Redis knows nothing), completed with the first run's stored result, nothing written.
    expect(second.map((r) => ('status' in r ? `${r.outcome}/${r.status}` : r.outcome))).toEqual(
      keys.map(() => 'ACQUIRED/completed'),
    );
    expect(second.map((r) => (r as { result: unknown }).result)).toEqual(
      first.map((r) => (r as { result: unknown }).result),
    );
    expect(effects).toBe(keys.length);
    const ledger = await db.ledger();
    expect(keys.map((k) => ledger[k])).toEqual(keys.map(() => 1));

    // Redis holds the record again, so the next duplicate stops there.
    const third = await runner.run({ scope, key: keys[0]! }, handler);
    expect(third.outcome).toBe('DUPLICATE');
  });
});
