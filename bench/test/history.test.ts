import { mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  type RunRecord,
  type RunResults,
  ratiosOf,
  readRunRecords,
  recordFileName,
  writeRunRecord,
} from '../src/history';
import type { Series } from '../src/throughput';

const series = (name: string, ratio: number, p99Ratio = 1): Series => ({ name, rounds: [], ratio, p99Ratio });
const machine = { node: 'v20', cpus: '2 × test', memoryGiB: 1, loadAverage: [0.5, 0.4, 0.3], redis: '7.0' };
const run = (date: string, ratios: Record<string, number> = {}): RunRecord => ({
  date,
  commit: 'abc',
  seconds: 1,
  machine,
  ratios,
  targets: [],
});

describe('ratiosOf', () => {
  it('names every ratio by section, table and row, with ours ÷ the peer for the peers', () => {
    const results: RunResults = {
      core: {
        concurrent: [series('bare', 1), series('Idempotency.run', 1.2, 0.8)],
        sequential: [series('bare', 1), series('Idempotency.run', 0.9)],
        duplicates: [],
        sequentialDuplicates: [],
      },
      peers: {
        concurrent: [series('ours', 1), series('Powertools', 0.5)],
        duplicates: [series('ours', 1), series('Powertools', 0.25)],
        race: [
          { name: 'ours', race: { keys: 200, callers: 16, runs: 200, keysRunTwice: 0, busy: 0, errors: 0 } },
        ],
      },
      claimMany: [{ batch: 10, calls: 1, writesPerCall: 1, keysPerSecond: 1, p50Us: 1 }],
      // A run from before the scripts-alone pass: no scriptsRatio, no sdkOverScripts.
      adapters: { rows: [{ broker: 'SQS', ratio: 0.6 }] },
      memory: { skipped: 'no redis-server' },
    };
    expect(ratiosOf(results)).toEqual({
      'core | new keys, concurrent | Idempotency.run': 1.2,
      'core | new keys, concurrent | Idempotency.run, p99': 0.8,
      'core | new keys, sequential | Idempotency.run': 0.9,
      'core | new keys, sequential | Idempotency.run, p99': 1,
      'peers | new keys | ours ÷ Powertools': 2,
      'peers | duplicates | ours ÷ Powertools': 4,
      'peers | race | ours, handler runs per key': 1,
      'claimMany | 10 keys | writes per call': 1,
      'adapters | SQS | SDK ÷ bare': 0.6,
    });
  });
});

describe('the run files', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'bench-history-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('are named by date without colons or milliseconds, so that names sort by date', () => {
    expect(recordFileName('2026-11-25T15:39:54.334Z')).toBe('2026-11-25T15-39-54Z.json');
  });

  it('are read back oldest first, without latest.json', () => {
    writeRunRecord(dir, run('2026-11-25T15:39:54.334Z', { a: 2 }));
    writeRunRecord(dir, run('2026-11-24T09:00:00.000Z', { a: 1 }));
    writeFileSync(join(dir, 'latest.json'), JSON.stringify({ date: '2026-11-26T00:00:00.000Z', ratios: {} }));
    expect(readRunRecords(dir).map((r) => r.ratios.a)).toEqual([1, 2]);
  });
});

describe('bench/results', () => {
  const dir = join(__dirname, '..', 'results');

  it('holds one run per file, each named by its date, with its commit or where git recorded it', () => {
    const files = readdirSync(dir).filter((f) => f !== 'latest.json');
    const runs = readRunRecords(dir);
    expect(runs.map((r) => recordFileName(r.date))).toEqual([...files].sort());
    for (const r of runs) {
      expect(r.commit ?? r.recordedIn).toMatch(/^[0-9a-f]{40}$/);
      expect(r.machine.cpus).toBeTruthy();
      expect(Object.keys(r.ratios).length).toBeGreaterThan(10);
    }
  });
});
