/**
 * `npm run bench`: the per-message overhead of `Idempotency.run` on real Redis, against a reference measured
 * in the same run (the minimal two-round-trip dedup `SET NX PX` + `SET PX`, and the bare handler), as
 * sequential latency (p50/p99), concurrent throughput (64 in flight, auto-pipelining off and on) and
 * memory per record. Redis: `REDIS_URL`, else 127.0.0.1:6379. Takes well under a minute.
 *
 * Environment: `BENCH_MESSAGES` (sequential messages per scenario, default 5000),
 * `BENCH_CONCURRENT_MESSAGES` (default 30000), `BENCH_IN_FLIGHT` (default 64).
 */
import { cpus } from 'node:os';
import Redis from 'ioredis';
import { concurrent, type LatencyStats, sequential, type ThroughputStats } from './measure';
import { measureMemory } from './memory';
import { latencyTable, memoryTable, throughputTable } from './report';
import {
  bareHandler,
  idempotencyDuplicate,
  idempotencyRun,
  reference,
  referenceDuplicate,
  type Scenario,
  storeOnly,
} from './scenarios';

const url = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const SEQUENTIAL = Number(process.env.BENCH_MESSAGES ?? 5_000);
const CONCURRENT = Number(process.env.BENCH_CONCURRENT_MESSAGES ?? 30_000);
const IN_FLIGHT = Number(process.env.BENCH_IN_FLIGHT ?? 64);
const prefix = `bench:${process.pid}:${Date.now().toString(36)}`;

async function connect(enableAutoPipelining: boolean): Promise<Redis> {
  const redis = new Redis(url, {
    enableAutoPipelining,
    lazyConnect: true,
    connectTimeout: 2_000,
    maxRetriesPerRequest: 1,
    retryStrategy: () => null,
  });
  await redis.connect();
  await redis.ping();
  return redis;
}

async function deleteByPrefix(redis: Redis): Promise<void> {
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 5_000);
    cursor = next;
    if (keys.length > 0) await redis.unlink(...keys);
  } while (cursor !== '0');
}

/** Best of two alternating rounds (lower p50), so a scenario is not judged on one noisy pass. */
async function latencies(
  make: (round: string) => Scenario[],
  count: number,
): Promise<[string, LatencyStats][]> {
  const best = new Map<string, LatencyStats>();
  for (const round of ['a', 'b']) {
    for (const scenario of make(round)) {
      const stats = await sequential(count, (i) => scenario.process(i));
      const prior = best.get(scenario.name);
      if (!prior || stats.p50Us < prior.p50Us) best.set(scenario.name, stats);
    }
  }
  return [...best];
}

async function main(): Promise<void> {
  const started = Date.now();
  let plain: Redis;
  let pipelined: Redis;
  try {
    plain = await connect(false);
    pipelined = await connect(true);
  } catch (error) {
    process.stderr.write(`bench: cannot reach Redis at ${url}: ${(error as Error).message}\n`);
    process.stderr.write('Start one (redis-server --port 6379) or set REDIS_URL.\n');
    process.exit(1);
  }
  const info = await plain.info('server');
  const version = /redis_version:(\S+)/.exec(info)?.[1] ?? '?';
  process.stdout.write(
    `idempotent-consumer bench: Redis ${version} at ${url}, Node ${process.version}, ${cpus().length} CPUs\n\n`,
  );

  try {
    // Warm-up: connections, script load (EVAL once, then EVALSHA), JIT.
    await sequential(500, (i) => reference(plain, prefix, 'warm').process(i));
    const warm = idempotencyRun(plain, prefix, 'warm');
    await sequential(500, (i) => warm.process(i));

    const seq = await latencies(
      (round) => [
        bareHandler(),
        reference(plain, prefix, `seq-${round}`),
        storeOnly(plain, prefix, `seq-${round}`),
        idempotencyRun(plain, prefix, `seq-${round}`),
      ],
      SEQUENTIAL,
    );
    const dup = await latencies(
      (round) => [
        referenceDuplicate(plain, prefix, `seq-${round}`),
        idempotencyDuplicate(plain, prefix, `seq-${round}`),
      ],
      SEQUENTIAL,
    );

    const throughput: [string, boolean, ThroughputStats][] = [];
    for (const pipelining of [false, true]) {
      const redis = pipelining ? pipelined : plain;
      for (const make of [reference, storeOnly, idempotencyRun]) {
        const scenario = make(redis, prefix, `conc-${pipelining}`);
        throughput.push([
          scenario.name,
          pipelining,
          await concurrent(CONCURRENT, IN_FLIGHT, (i) => scenario.process(i)),
        ]);
      }
    }

    const memory = await measureMemory(plain, prefix);

    const referenceName = reference(plain, prefix, '').name;
    process.stdout.write(`${latencyTable([...seq, ...dup], referenceName)}\n\n`);
    process.stdout.write(`${throughputTable(throughput, referenceName)}\n\n`);
    process.stdout.write(`${memoryTable(memory)}\n\n`);

    const get = (name: string) => seq.find(([n]) => n === name)![1];
    const run = get(idempotencyRun(plain, prefix, '').name);
    const ref = get(referenceName);
    const bare = get(bareHandler().name);
    process.stdout.write(
      `Per-message overhead of Idempotency.run: ${(run.meanUs - bare.meanUs).toFixed(1)} µs mean over the bare ` +
        `handler, ${(run.meanUs - ref.meanUs).toFixed(1)} µs over the two-round-trip reference ` +
        `(${(run.p50Us / ref.p50Us).toFixed(2)}× its p50).\n` +
        `Total bench time ${((Date.now() - started) / 1000).toFixed(1)} s.\n`,
    );
  } finally {
    await deleteByPrefix(plain);
    await Promise.all([plain.quit(), pipelined.quit()]);
  }
}

main().catch((error: unknown) => {
  process.stderr.write(`bench failed: ${(error as Error).stack ?? String(error)}\n`);
  process.exit(1);
});
