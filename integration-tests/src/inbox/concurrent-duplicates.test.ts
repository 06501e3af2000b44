import type { RunResult } from '@idempotent-consumer/core';
import type { InboxRunResult } from '@idempotent-consumer/inbox-sql';
import { SqlDatabase } from '../../support/sql-database';
import { describeInbox } from './fixture';

jest.setTimeout(120_000);

const KEYS = 25;
const RACERS = 8;
/** Separate connection pools, so the racers really meet in the database, not in one pool's queue. */
const POOLS = 4;

describeInbox('concurrent duplicates', (fx) => {
  let pools: SqlDatabase[] = [];
  beforeAll(async () => {
    const { dialect, databaseUrl, db } = fx();
    pools = await Promise.all(
      Array.from({ length: POOLS }, () => SqlDatabase.attach(dialect, databaseUrl, db.schema, RACERS)),
    );
  });
  afterAll(() => Promise.all(pools.map((p) => p.close())));

  it(`${RACERS} runners per key through Redis and the inbox: one ledger row per key`, async () => {
    const { db, scope } = fx();
    const runners = Array.from({ length: RACERS }, () => fx().idempotency({ leaseMs: 10_000 }));
    const outcomes: Record<string, number> = {};
    await Promise.all(
      Array.from({ length: KEYS * RACERS }, async (_, i) => {
        const key = `redis-race-${i % KEYS}`;
        const pool = pools[i % POOLS]!;
        const r: RunResult<unknown> = await runners[i % RACERS]!.run(
          { scope, key },
          pool.inbox().handler((tx, ctx) => pool.writeLedger(tx, ctx.key, ctx.fencingToken)),
        );
        const name = 'status' in r ? `${r.outcome}/${r.status}` : r.outcome;
        outcomes[name] = (outcomes[name] ?? 0) + 1;
      }),
    );
    const ledger = await db.ledger();
    const keys = Object.keys(ledger).filter((k) => k.startsWith('redis-race-'));
    expect(keys).toHaveLength(KEYS);
    expect(keys.map((k) => ledger[k])).toEqual(keys.map(() => 1));
    expect(outcomes['ACQUIRED/completed']).toBe(KEYS);
  });

  /** Races `RACERS` inbox runs per key, without Redis, with the fencing token `tokenOf(racer)`. */
  async function raceInbox(prefix: string, tokenOf: (racer: number) => number) {
    const { db, scope } = fx();
    const results: (InboxRunResult<unknown> | { status: 'lease-lost' })[] = [];
    await Promise.all(
      Array.from({ length: KEYS * RACERS }, async (_, i) => {
        const key = `${prefix}-${i % KEYS}`;
        const racer = Math.floor(i / KEYS);
        const pool = pools[i % POOLS]!;
        const fencingToken = tokenOf(racer);
        try {
          results.push(
            await pool
              .inbox()
              .run({ scope, key, fencingToken }, (tx) => pool.writeLedger(tx, key, fencingToken)),
          );
        } catch (error) {
          if ((error as { code?: string }).code !== 'LEASE_LOST') throw error;
          results.push({ status: 'lease-lost' });
        }
      }),
    );
    const ledger = await db.ledger();
    const keys = Object.keys(ledger).filter((k) => k.startsWith(`${prefix}-`));
    expect(keys).toHaveLength(KEYS);
    expect(keys.map((k) => ledger[k])).toEqual(keys.map(() => 1));
    expect(results.filter((r) => r.status === 'committed')).toHaveLength(KEYS);
    return results;
  }

  it('the inbox alone, every racer with the same token (no claim held): one commit per key, the rest duplicates', async () => {
    const results = await raceInbox('same-token', () => 0);
    expect(results.filter((r) => r.status === 'duplicate')).toHaveLength(KEYS * (RACERS - 1));
  });

  it('the inbox alone, every racer with its own token: one commit per key, the rest duplicates or fenced', async () => {
    const results = await raceInbox('own-token', (racer) => racer + 1);
    expect(results).toHaveLength(KEYS * RACERS);
  });
});
