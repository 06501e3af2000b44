import { type ChildProcess, spawn } from 'node:child_process';
import { join } from 'node:path';
import { describeWithServices } from '../../support/service';
import type { RaceWorkerConfig, RaceWorkerMessage } from '../../workers/core-race-worker';
import { useRedisStore } from './redis-target';

const WORKER = join(__dirname, '..', '..', 'workers', 'core-race-worker.ts');
const PROCESSES = 4;
const CONNECTIONS_PER_PROCESS = 2;

type Outcomes = Record<string, Record<string, number>>;

/**
 * Starts `PROCESSES` worker processes, waits until every one is connected (the barrier), tells them all to
 * fire at the same wall-clock instant, and collects each process's outcome counts per key.
 */
async function race(config: Omit<RaceWorkerConfig, 'connections' | 'startKey'>): Promise<Outcomes[]> {
  const children: ChildProcess[] = [];
  try {
    const results = Array.from({ length: PROCESSES }, (_, index) => {
      // Each process visits the keys in a rotated order, two processes starting at the same key, so every
      // key meets claims from processes that are at its start and others that are mid-way.
      const startKey = Math.floor(index / 2) * Math.floor(config.keys / 2);
      const child = spawn(process.execPath, ['--import', 'tsx', WORKER], {
        env: {
          ...process.env,
          RACE_WORKER_CONFIG: JSON.stringify({ ...config, connections: CONNECTIONS_PER_PROCESS, startKey }),
        },
        stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
      });
      children.push(child);
      let onReady!: () => void;
      const ready = new Promise<void>((r) => (onReady = r));
      const done = new Promise<Outcomes>((resolve, reject) => {
        child.on('message', (m: RaceWorkerMessage) => {
          if (m.type === 'ready') onReady();
          if (m.type === 'done') {
            if (m.errors.length > 0) reject(new Error(`worker errors: ${m.errors.slice(0, 3).join('; ')}`));
            else resolve(m.outcomes);
          }
        });
        child.once('exit', (code) => reject(new Error(`worker exited with ${code} before reporting`)));
      });
      return { child, ready, done };
    });
    await Promise.all(results.map((r) => r.ready));
    const atMs = Date.now() + 100;
    for (const r of results) r.child.send({ type: 'go', atMs });
    return await Promise.all(results.map((r) => r.done));
  } finally {
    for (const child of children) if (child.exitCode === null) child.kill();
  }
}

/** Sums the per-process counts per key. */
function merge(perProcess: Outcomes[]): Outcomes {
  const total: Outcomes = {};
  for (const outcomes of perProcess) {
    for (const [key, counts] of Object.entries(outcomes)) {
      const t = total[key] ?? {};
      total[key] = t;
      for (const [outcome, n] of Object.entries(counts)) t[outcome] = (t[outcome] ?? 0) + n;
    }
  }
  return total;
}

describeWithServices(
  ['redis'],
  `race: ${PROCESSES} processes × ${CONNECTIONS_PER_PROCESS} connections claim the same keys`,
  ({ redis: url }) => {
    const suite = useRedisStore(url, 'race');

    /**
     * Races 16 claimers a key (`mode` as the workers run it, each handler `handlerMs` long) over `keys` keys
     * under the prefix `<suite prefix>-<name>`; resolves with the counts per process and their sum per key.
     */
    async function raceKeys(mode: RaceWorkerConfig['mode'], name: string, keys: number, handlerMs: number) {
      const prefix = `${suite.prefix}-${name}`;
      const perProcess = await race({ mode, url, prefix, keys, claimersPerKey: 16 / PROCESSES, handlerMs });
      return { prefix, perProcess, total: merge(perProcess) };
    }

    it('500 keys × 16 concurrent claimers: exactly one ACQUIRED per key, the other 15 CONFLICT', async () => {
      const keys = 500;
      // Every attempt must be correct. That the processes really interleaved (more than one of them won
      // keys) is up to the OS scheduler: on a loaded machine one process can be descheduled until another
      // has claimed every key, so the race is run again, on new keys, up to three times until it shows.
      let processesThatWon = 0;
      for (let attempt = 1; attempt <= 3 && processesThatWon < 2; attempt++) {
        const { prefix, perProcess, total } = await raceKeys('claim', `claim-${attempt}`, keys, 0);
        expect(Object.keys(total)).toHaveLength(keys);
        const shapes = new Map<string, number>();
        for (const counts of Object.values(total)) {
          const shape = JSON.stringify(Object.entries(counts).sort());
          shapes.set(shape, (shapes.get(shape) ?? 0) + 1);
        }
        expect([...shapes]).toEqual([
          [
            JSON.stringify([
              ['ACQUIRED', 1],
              ['CONFLICT', 15],
            ]),
            keys,
          ],
        ]);
        // Which process won each key.
        const wins = perProcess.map((o) => Object.values(o).filter((c) => c.ACQUIRED === 1).length);
        process.stderr.write(
          `[race] claim, attempt ${attempt}: ${keys} keys × 16 claimers; ACQUIRED per process: ${wins.join(', ')}\n`,
        );
        expect(wins.reduce((a, b) => a + b, 0)).toBe(keys);
        processesThatWon = wins.filter((w) => w > 0).length;
        // And the records agree: one claim each (attempt 1), a token written with every digit.
        const pipeline = suite.redis.pipeline();
        for (let k = 0; k < keys; k++) pipeline.hmget(`${prefix}:4:race:k${k}`, 's', 't', 'a');
        const records = (await pipeline.exec())!.map(([, r]) => r as string[]);
        expect(new Set(records.map(([s, , a]) => `${s},${a}`))).toEqual(new Set(['P,1']));
        for (const [, t] of records) expect(t).toMatch(/^\d{16}$/);
      }
      expect(processesThatWon).toBeGreaterThanOrEqual(2);
    });

    it('Idempotency.run × 16 per key: each side effect happens exactly once; the others CONFLICT or DUPLICATE', async () => {
      const keys = 200;
      const { prefix, total } = await raceKeys('run', 'run', keys, 20);
      expect(Object.keys(total)).toHaveLength(keys);
      const sums: Record<string, number> = {};
      for (const counts of Object.values(total)) {
        expect(counts['ACQUIRED/completed']).toBe(1);
        expect(Object.values(counts).reduce((a, b) => a + b, 0)).toBe(16);
        for (const outcome of Object.keys(counts)) {
          expect(['ACQUIRED/completed', 'CONFLICT', 'DUPLICATE']).toContain(outcome);
        }
        for (const [o, n] of Object.entries(counts)) sums[o] = (sums[o] ?? 0) + n;
      }
      process.stderr.write(`[race] run: ${keys} keys × 16 runners; outcomes: ${JSON.stringify(sums)}\n`);
      const sideEffects = await suite.redis.mget(
        ...Array.from({ length: keys }, (_, k) => `${prefix}:side:k${k}`),
      );
      expect(sideEffects.filter((v) => v !== '1')).toEqual([]);
    });
  },
);
