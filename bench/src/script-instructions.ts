/**
 * `node bench/dist/script-instructions.js [lua dir …]`: the CPU instructions a `redis-server` spends on one
 * `EVALSHA` of each script on the hot path, counted by valgrind's callgrind (`apt-get install valgrind`),
 * for each `lua/` directory given (default: this repository's), e.g. an older checkout's to compare.
 *
 * Instructions, not microseconds: callgrind counts the server's own instructions (reading the command,
 * running the script, writing the reply; not the kernel's), repeatable within about 2% whatever else the
 * machine is doing, where the microseconds of `script-cost.js` move by ±30% on a shared machine.
 * Each figure is the count over 1,000 calls pipelined 50 at a time (`callgrind_control` zeroes the
 * counters before and dumps them after), divided by 1,000:
 * - claim, new key: `claim.lua` on a key that does not exist (ACQUIRED);
 * - complete: `complete.lua` of those claims, with a small result;
 * - claim, duplicate: `claim.lua` again on the completed keys (DUPLICATE);
 * - claim, reserve: `claim.lua` with reserve '1' on new keys (batch consumers);
 * - start: `start.lua` of those reservations.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Redis from 'ioredis';
import { LUA_DIR, luaSource } from './lua-source';
import { startPrivateRedis } from './private-redis';

const CALLS = 1_000;
const PIPELINE = 50;
const LEASE_MS = 30_000;
const RETENTION_MS = 600_000;

/** Zeroes the server's counters, runs `work`, dumps them: the instructions `work` cost the server. */
async function counted(pid: number, dumps: string, work: () => Promise<void>): Promise<number> {
  execFileSync('callgrind_control', ['--zero', String(pid)], { stdio: 'ignore' });
  await work();
  const before = new Set(readdirSync(dumps));
  execFileSync('callgrind_control', ['--dump', String(pid)], { stdio: 'ignore' });
  const dump = readdirSync(dumps).find((f) => !before.has(f));
  if (!dump) throw new Error('callgrind wrote no dump');
  const text = readFileSync(join(dumps, dump), 'utf8');
  rmSync(join(dumps, dump));
  const total = /^(?:summary|totals): (\d+)/m.exec(text);
  if (!total) throw new Error(`no instruction total in ${dump}`);
  return Number(total[1]);
}

/** Sends `CALLS` EVALSHAs of one script, `PIPELINE` at a time; checks each reply's first element. */
async function calls(
  redis: Redis,
  sha1: string,
  keys: readonly string[],
  args: (i: number) => (string | number)[],
  expected: string,
): Promise<unknown[][]> {
  const replies: unknown[][] = [];
  for (let from = 0; from < keys.length; from += PIPELINE) {
    const pipeline = redis.pipeline();
    for (let i = from; i < Math.min(from + PIPELINE, keys.length); i++)
      pipeline.evalsha(sha1, 1, keys[i]!, ...args(i));
    for (const [error, reply] of (await pipeline.exec())!) {
      if (error) throw error;
      if ((reply as unknown[])[0] !== expected) throw new Error(`expected ${expected}, got ${String(reply)}`);
      replies.push(reply as unknown[]);
    }
  }
  return replies;
}

async function main(): Promise<void> {
  const dirs = process.argv.slice(2);
  if (dirs.length === 0) dirs.push(LUA_DIR);
  try {
    execFileSync('callgrind_control', ['--help'], { stdio: 'ignore' });
  } catch {
    process.stderr.write('script-instructions: valgrind is not installed (apt-get install -y valgrind)\n');
    process.exitCode = 1;
    return;
  }
  const dumps = mkdtempSync(join(tmpdir(), 'script-instructions-'));
  const server = await startPrivateRedis({
    wrapper: ['valgrind', '--tool=callgrind', `--callgrind-out-file=${join(dumps, 'callgrind.out.%p')}`],
    startTimeoutMs: 60_000,
  });
  const redis = new Redis(server.url);
  try {
    for (const [n, dir] of dirs.entries()) {
      const sha1 = async (name: string) => (await redis.script('LOAD', luaSource(name, dir))) as string;
      const [claim, complete, start] = [await sha1('claim'), await sha1('complete'), await sha1('start')];
      const keys = Array.from({ length: CALLS }, (_, i) => `${n}:new:${i}`);
      const reserved = Array.from({ length: CALLS }, (_, i) => `${n}:reserved:${i}`);
      // As the store sends them, a nonce per claim included (lua/claim.lua ARGV[7]; older scripts ignore it).
      const claimArgs = (reserve: string) => (i: number) => [
        LEASE_MS,
        RETENTION_MS,
        '',
        0,
        reserve,
        '',
        `bench${n}nonce${i.toString(36)}`,
      ];
      const per = (instructions: number) => Math.round(instructions / CALLS).toLocaleString('en-US');
      // The token of a claim's reply (its second element), by call.
      const tokenOf = (replies: unknown[][], i: number) => replies[i]![1] as number;
      let claims: unknown[][] = [];
      let reservations: unknown[][] = [];
      // In order: each phase works on what the one before it wrote.
      const phases: [string, () => Promise<unknown>][] = [
        [
          'claim, new key',
          async () => (claims = await calls(redis, claim, keys, claimArgs('0'), 'ACQUIRED')),
        ],
        [
          'complete',
          () =>
            calls(
              redis,
              complete,
              keys,
              (i) => [tokenOf(claims, i), RETENTION_MS, '1', 'j{"ok":true}'],
              'OK',
            ),
        ],
        ['claim, duplicate', () => calls(redis, claim, keys, claimArgs('0'), 'DUPLICATE')],
        [
          'claim, reserve',
          async () => (reservations = await calls(redis, claim, reserved, claimArgs('1'), 'ACQUIRED')),
        ],
        [
          'start',
          () =>
            calls(redis, start, reserved, (i) => [tokenOf(reservations, i), LEASE_MS, RETENTION_MS], 'OK'),
        ],
      ];
      const row: string[] = [];
      for (const [label, phase] of phases) {
        row.push(`${label} ${per(await counted(server.pid, dumps, async () => void (await phase())))}`);
      }
      process.stdout.write(`${dir}: instructions per EVALSHA: ${row.join(', ')}\n`);
    }
  } finally {
    redis.disconnect();
    await server.stop();
    rmSync(dumps, { recursive: true, force: true });
  }
}

void main();
