import { defaultIsRetryable } from '@idempotent-consumer/core';
import { pgClient, type RunInTransaction } from '@idempotent-consumer/inbox-sql';
import { describeInbox, gate } from './fixture';

jest.setTimeout(60_000);

describeInbox(
  'PostgreSQL above READ COMMITTED',
  (fx) => {
    for (const level of ['REPEATABLE READ', 'SERIALIZABLE']) {
      it(`${level}: a stalled holder fenced by a later claim fails at its commit statement with 40001 (retryable), rolled back`, async () => {
        const { databaseUrl, db, scope } = fx();
        const { Pool } = await import('pg');
        const pool = new Pool({ connectionString: databaseUrl, max: 2 });
        const transaction: RunInTransaction = async (body) => {
          const client = await pool.connect();
          try {
            await client.query(`BEGIN ISOLATION LEVEL ${level}`);
            try {
              const result = await body(pgClient(client));
              await client.query('COMMIT');
              return result;
            } catch (error) {
              await client.query('ROLLBACK');
              throw error;
            }
          } finally {
            client.release();
          }
        };
        try {
          const inbox = db.inbox({ transaction });
          const key = `stalled-${level.replace(' ', '-').toLowerCase()}`;
          const aWrote = gate();
          const aStalled = gate();
          const aRun = inbox.run({ scope, key, fencingToken: 1 }, async (tx) => {
            await db.writeLedger(tx, key, 1); // the transaction's snapshot is taken here
            aWrote.open();
            await aStalled.promise;
            return 'A';
          });
          await aWrote.promise;
          // A later claim fences the row (autocommit) after A's snapshot, then A resumes.
          await expect(inbox.fence({ scope, key, fencingToken: 2 })).resolves.toEqual({ status: 'proceed' });
          aStalled.open();
          const error = await aRun.then(
            () => undefined,
            (e: unknown) => e,
          );
          // Not LeaseLostError as at READ COMMITTED: the driver's serialization failure, which the runner
          // retries (no `retryable: false`), and nothing of A was committed.
          expect(error).toMatchObject({ code: '40001' });
          expect(defaultIsRetryable(error)).toBe(true);
          expect(await inbox.read({ scope, key })).toMatchObject({
            fencingToken: 2,
            committedAtMs: undefined,
          });
          await expect(
            inbox.run({ scope, key, fencingToken: 2 }, async (tx) => {
              await db.writeLedger(tx, key, 2);
              return 'B';
            }),
          ).resolves.toEqual({ status: 'committed', result: 'B' });
          expect(await db.ledgerTokens(key)).toEqual([2]);
        } finally {
          await pool.end();
        }
      });
    }
  },
  { dialects: ['postgres'] },
);
