import type { SqlClient } from '@idempotent-consumer/inbox-sql';
import { freePort } from '../../support/net';
import { SqlDatabase } from '../../support/sql-database';
import { describeInbox } from './fixture';

jest.setTimeout(60_000);

describeInbox('the database is down (fails closed)', (fx) => {
  it('refused connections: the handler fails before any write, the claim is released, nothing is completed', async () => {
    const { dialect, db, scope } = fx();
    const port = await freePort(); // nothing listens there
    const url =
      dialect === 'postgres'
        ? `postgres://postgres@127.0.0.1:${port}/test`
        : `mysql://root@127.0.0.1:${port}/test`;
    const down = await SqlDatabase.attach(dialect, url, db.schema, 1);
    const runner = fx().idempotency({ leaseMs: 5000 });
    const key = 'db-refuses';
    let effects = 0;
    try {
      const r = await runner.run(
        { scope, key },
        down.inbox().handler(async (tx) => {
          effects++;
          await down.writeLedger(tx, key, 0);
        }),
      );
      // Released (retryable): the adapters nack / delay / leave the message invisible; never ack it.
      expect(r).toMatchObject({ outcome: 'ACQUIRED', status: 'released', recorded: true });
      expect(String((r as { error: unknown }).error)).toMatch(/ECONNREFUSED|connect/i);
    } finally {
      await down.close().catch(() => {});
    }
    expect(effects).toBe(0);
    expect(await db.inbox().read({ scope, key })).toBeUndefined();

    // The database is back: the redelivery claims the released key and writes once.
    const again = await runner.run(
      { scope, key },
      db.inbox().handler((tx, ctx) => db.writeLedger(tx, key, ctx.fencingToken)),
    );
    expect(again).toMatchObject({ outcome: 'ACQUIRED', status: 'completed', attempt: 2 });
    expect(await db.ledger()).toMatchObject({ [key]: 1 });
  });

  it('the connection dies inside the transaction: rolled back, released, the retry writes once', async () => {
    const { dialect, db, scope } = fx();
    const runner = fx().idempotency({ leaseMs: 5000 });
    const key = 'db-dies-mid-transaction';
    /** Ends this transaction's own server connection (never the server): a crash of the database session. */
    const killOwnConnection = async (tx: SqlClient) => {
      if (dialect === 'postgres') {
        await tx.query('SELECT pg_terminate_backend(pg_backend_pid())', []);
      } else {
        const { rows } = await tx.query('SELECT CONNECTION_ID() AS id', []);
        await tx.query(`KILL CONNECTION ${Number(rows[0]!.id)}`, []);
      }
    };
    let attempts = 0;
    const handler = db.inbox().handler(async (tx, ctx) => {
      attempts++;
      await db.writeLedger(tx, key, ctx.fencingToken);
      if (attempts === 1) await killOwnConnection(tx);
      return attempts;
    });
    const first = await runner.run({ scope, key }, handler);
    expect(first).toMatchObject({ status: 'released', recorded: true });
    expect(await db.ledger()).not.toHaveProperty(key);
    const second = await runner.run({ scope, key }, handler);
    expect(second).toMatchObject({ status: 'completed', result: 2, attempt: 2 });
    expect(await db.ledger()).toMatchObject({ [key]: 1 });
  });
});
