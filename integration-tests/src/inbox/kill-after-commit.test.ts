import { type ChildProcess, fork } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Idempotency, RedisIdempotencyStore, type RunResult } from '@idempotent-consumer/core';
import { transformFile } from '@swc/core';
import Redis from 'ioredis';
import { describeWithServices } from '../../support/service';
import { DIALECTS, SqlDatabase } from '../../support/sql-database';
import type { InboxKillWorkerConfig, InboxKillWorkerMessage } from '../../workers/inbox-kill-worker';

const WORKER = join(__dirname, '../../workers/inbox-kill-worker.ts');
/** Where the worker's packages resolve from once compiled into a temporary directory. */
const NODE_MODULES = join(__dirname, '../../../node_modules');
/** Consumer processes killed, one payment each, each between its commit and its COMPLETED write. */
const KILLS = 100;
/** Consumer processes alive at once (spawning overlaps the kills; each still dies on its own key). */
const SLOTS = 4;
const LEASE_MS = 3000;

jest.setTimeout(900_000); // 100 process starts per dialect: minutes on a loaded 2-core machine

for (const dialect of DIALECTS) {
  describeWithServices(
    ['redis', dialect],
    `inbox on ${dialect}: consumer SIGKILLed after its transaction committed, before COMPLETED`,
    (urls) => {
      const id = randomBytes(4).toString('hex');
      const keyPrefix = `inbox-it-kill-${id}`;
      const scope = `payments-${id}`;
      let db: SqlDatabase;
      let redis: Redis;
      const children = new Set<ChildProcess>();
      const compiledWorker = join(tmpdir(), `inbox-kill-worker-${id}.js`);

      beforeAll(async () => {
        db = await SqlDatabase.create(dialect, urls[dialect]);
        redis = new Redis(urls.redis);
        const { code } = await transformFile(WORKER, {
          jsc: { parser: { syntax: 'typescript' }, target: 'es2022' },
          module: { type: 'commonjs' },
        });
        await writeFile(compiledWorker, code);
      });
      afterAll(async () => {
        for (const child of children) child.kill('SIGKILL');
        await rm(compiledWorker, { force: true });
        await db?.drop();
        if (redis) {
          const keys = await redis.keys(`${keyPrefix}*`);
          if (keys.length > 0) await redis.del(...keys);
          await redis.quit();
        }
      });

      /** Forks a consumer process and resolves once its pools answer. */
      function spawnWorker(): Promise<{ child: ChildProcess; messages: InboxKillWorkerMessage[] }> {
        const config: InboxKillWorkerConfig = {
          dialect,
          databaseUrl: urls[dialect],
          inboxTable: `${db.schema}.idempotency_inbox`,
          ledgerInsertSql: db.ledgerInsertSql,
          redisUrl: urls.redis,
          keyPrefix,
          scope,
          leaseMs: LEASE_MS,
        };
        const child = fork(compiledWorker, [], {
          execArgv: [],
          env: { ...process.env, NODE_PATH: NODE_MODULES, INBOX_WORKER_CONFIG: JSON.stringify(config) },
          stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
        });
        children.add(child);
        const messages: InboxKillWorkerMessage[] = [];
        return new Promise((resolve, reject) => {
          child.on('message', (m: InboxKillWorkerMessage) => {
            messages.push(m);
            if (m.type === 'ready') resolve({ child, messages });
            if (m.type === 'error') reject(new Error(`inbox worker: ${m.message}`));
          });
          child.once('exit', (code, signal) => reject(new Error(`inbox worker exited (${code ?? signal})`)));
        });
      }

      /** Sends one payment to a fresh consumer and SIGKILLs it as soon as its transaction committed. */
      async function killAfterCommit(key: string): Promise<number> {
        const { child, messages } = await spawnWorker();
        const committed = new Promise<number>((resolve, reject) => {
          child.on('message', (m: InboxKillWorkerMessage) => {
            if (m.type === 'committed' && m.key === key) resolve(m.fencingToken);
            if (m.type === 'error') reject(new Error(`inbox worker: ${m.message}`));
          });
          child.once('exit', () => reject(new Error(`inbox worker exited before committing ${key}`)));
        });
        const exited = new Promise((resolve) => child.once('exit', resolve));
        child.send({ type: 'run', key });
        try {
          return await committed;
        } finally {
          child.kill('SIGKILL');
          await exited;
          children.delete(child);
          expect(messages.filter((m) => m.type === 'error')).toEqual([]);
        }
      }

      it(`${KILLS} kills in a row on different keys: every ledger row written once, every record completed from the inbox`, async () => {
        const keys = Array.from({ length: KILLS }, (_, i) => `pay-${i}`);
        const killedTokens = new Map<string, number>();
        let next = 0;
        await Promise.all(
          Array.from({ length: SLOTS }, async () => {
            while (next < keys.length) {
              const key = keys[next++]!;
              killedTokens.set(key, await killAfterCommit(key));
            }
          }),
        );
        expect(killedTokens.size).toBe(KILLS);

        // Every killed consumer's payment is in the ledger once, written by the killed claim.
        const afterKills = await db.ledger();
        expect(Object.keys(afterKills).sort()).toEqual([...keys].sort());
        expect(Object.values(afterKills).every((n) => n === 1)).toBe(true);

        // The redeliveries: a healthy consumer claims each key once its lease lapsed (ACQUIRED_STALE: the
        // killed claim never wrote COMPLETED), finds the inbox row, and completes without writing again.
        const idempotency = new Idempotency(
          { store: new RedisIdempotencyStore({ redis }, { keyPrefix }) },
          { leaseMs: LEASE_MS },
        );
        const inbox = db.inbox();
        let effectsRun = 0;
        const handler = inbox.handler(async (tx, ctx) => {
          effectsRun++;
          await db.writeLedger(tx, ctx.key, ctx.fencingToken);
          return 'charged';
        });
        const results: RunResult<unknown>[] = [];
        for (const key of keys) {
          let result = await idempotency.run({ scope, key }, handler);
          while (result.outcome === 'CONFLICT') {
            await new Promise((r) =>
              setTimeout(r, result.outcome === 'CONFLICT' ? result.retryAfterMs + 10 : 0),
            );
            result = await idempotency.run({ scope, key }, handler);
          }
          results.push(result);
        }
        expect(results.map((r) => `${r.outcome}/${'status' in r ? r.status : ''}`)).toEqual(
          keys.map(() => 'ACQUIRED_STALE/completed'),
        );
        expect(effectsRun).toBe(0);
        expect(await db.ledger()).toEqual(afterKills);
        for (const key of keys.slice(0, 5)) {
          expect(await db.ledgerTokens(key)).toEqual([killedTokens.get(key)]);
        }

        // And a later duplicate is a plain DUPLICATE from Redis.
        const again = await idempotency.run({ scope, key: keys[0]! }, handler);
        expect(again.outcome).toBe('DUPLICATE');
        expect(effectsRun).toBe(0);
      });
    },
  );
}
