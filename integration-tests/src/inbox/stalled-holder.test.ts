import { describeInbox, gate } from './fixture';

jest.setTimeout(60_000);

describeInbox('a stalled holder whose lease was taken over', (fx) => {
  /**
   * Holder A claims, writes its ledger row inside the transaction and stalls (a GC pause, a hung call);
   * its lease lapses and B claims the key (ACQUIRED_STALE, a higher fencing token) and fences the inbox.
   */
  async function stalledThenTakenOver(key: string) {
    const { db, scope } = fx();
    const runner = fx().idempotency({ leaseMs: 300 });
    const inbox = db.inbox();
    const a = await runner.claim({ scope, key });
    expect(a.outcome).toBe('ACQUIRED');
    const aStalled = gate();
    const aWrote = gate();
    const aRun = inbox.run({ scope, key, fencingToken: a.fencingToken }, async (tx) => {
      await db.writeLedger(tx, key, a.fencingToken);
      aWrote.open();
      await aStalled.promise;
      return 'A';
    });
    await aWrote.promise;
    const b = await fx().claimWhenFree(runner, key);
    expect(b.outcome).toBe('ACQUIRED_STALE');
    expect(b.fencingToken).toBeGreaterThan(a.fencingToken);
    return { db, scope, inbox, aRun, resumeA: aStalled.open, bToken: b.fencingToken };
  }

  it('cannot commit while the new holder runs: LeaseLostError, its write rolled back', async () => {
    const key = 'stalled-while-b-runs';
    const { db, scope, inbox, aRun, resumeA, bToken } = await stalledThenTakenOver(key);
    const bStalled = gate();
    const bWrote = gate();
    const bRun = inbox.run({ scope, key, fencingToken: bToken }, async (tx) => {
      await db.writeLedger(tx, key, bToken);
      bWrote.open();
      await bStalled.promise;
      return 'B';
    });
    await bWrote.promise; // B fenced the row with its token and holds an open transaction
    resumeA();
    await expect(aRun).rejects.toMatchObject({ code: 'LEASE_LOST', retryable: true });
    expect(await db.ledger()).not.toHaveProperty(key);
    bStalled.open();
    await expect(bRun).resolves.toEqual({ status: 'committed', result: 'B' });
    expect(await db.ledgerTokens(key)).toEqual([bToken]);
  });

  it('cannot commit after the new holder committed: rolled back, reported as a duplicate of B', async () => {
    const key = 'stalled-after-b-committed';
    const { db, scope, inbox, aRun, resumeA, bToken } = await stalledThenTakenOver(key);
    await expect(
      inbox.run({ scope, key, fencingToken: bToken }, async (tx) => {
        await db.writeLedger(tx, key, bToken);
        return 'B';
      }),
    ).resolves.toEqual({ status: 'committed', result: 'B' });
    resumeA();
    await expect(aRun).resolves.toMatchObject({ status: 'duplicate', result: 'B', fencingToken: bToken });
    expect(await db.ledgerTokens(key)).toEqual([bToken]);
  });

  it('a holder fenced before it starts does not run its side effect at all', async () => {
    const { db, scope } = fx();
    const inbox = db.inbox();
    const key = 'fenced-before-start';
    await expect(
      inbox.run({ scope, key, fencingToken: 7 }, async (tx) => {
        await db.writeLedger(tx, key, 7);
        return 'new';
      }),
    ).resolves.toEqual({ status: 'committed', result: 'new' });
    let ran = false;
    const late = await inbox.run({ scope, key, fencingToken: 6 }, async () => {
      ran = true;
    });
    expect(late).toMatchObject({ status: 'duplicate', result: 'new', fencingToken: 7 });
    expect(ran).toBe(false);
  });
});
