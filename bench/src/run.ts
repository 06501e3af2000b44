/**
 * `npm run bench [-- --quick] [-- --only core peers ...]`: idempotent-consumer measured against references
 * in the same run on the same Redis (`REDIS_URL`, else 127.0.0.1:6379): the bare scripts sent by EVALSHA,
 * Powertools' idempotency utility and message-queue-toolkit's deduplication store, the broker clients
 * without the SDK, and a plain string key for memory. Prints tables and writes `bench/results/latest.json`;
 * a full run also adds its ratios to the history there (history.ts). See bench/README.md.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, totalmem } from 'node:os';
import { dirname } from 'node:path';
import { Idempotency, RedisIdempotencyStore } from '@idempotent-consumer/core';
import { DEFAULT_MAX_COMMANDS_PER_WRITE } from '@idempotent-consumer/core/tools';
import Redis from 'ioredis';
import type { AdapterRow } from './adapters/adapter-row';
import { benchBullmq } from './adapters/bullmq';
import { benchKafka } from './adapters/kafka';
import { benchNats } from './adapters/nats';
import { benchRabbitmq } from './adapters/rabbitmq';
import { benchSqs } from './adapters/sqs';
import { bareScripts } from './bare-scripts';
import { type ClaimManyRow, measureClaimMany } from './claim-many';
import type { Contender } from './contender';
import { CpuMeter } from './cpu-meter';
import { type HandoffRow, measureHandoff } from './handoff';
import { checkout, ratiosOf, writeRunRecord } from './history';
import { benchHttp, type HttpGroup } from './http/section';
import { type MemoryRow, measureMemory } from './memory';
import { type BenchOptions, parseOptions, SECTIONS, type Section } from './options';
import { Ours, ours } from './ours';
import { messageQueueToolkit } from './peers/message-queue-toolkit';
import { powertools } from './peers/powertools';
import { startPrivateRedis } from './private-redis';
import { type RaceResult, race, type StalledOwnerVerdict, stalledOwner } from './race';
import { connectRedis, deleteByPrefix, redisUrl } from './redis';
import {
  adapterTable,
  claimManyTable,
  handoffTable,
  httpRaceTable,
  httpTable,
  memoryTable,
  raceTable,
  seriesTable,
  type Target,
  targetTable,
} from './report';
import { stalledHeartbeats } from './stalled-store';
import { bareClaimOnly, measureRounds, type Series } from './throughput';

const prefix = `bench:${process.pid}:${Date.now().toString(36)}`;
const out = (text: string) => process.stdout.write(`${text}\n`);

interface Results {
  core?: {
    concurrent: Series[];
    sequential: Series[];
    duplicates: Series[];
    sequentialDuplicates: Series[];
    handoff: HandoffRow[];
  };
  peers?: {
    concurrent: Series[];
    duplicates: Series[];
    race: { name: string; race: RaceResult; stalled: StalledOwnerVerdict }[];
  };
  claimMany?: ClaimManyRow[];
  /** `rows`: per adapter, the pass with the median ratio; `rounds`: every measured pass. */
  adapters?: { rows: AdapterRow[]; rounds: Record<string, AdapterRow[]>; skipped: string[] };
  memory?: { records: number; rows: MemoryRow[] } | { skipped: string };
  http?: HttpGroup[];
}

async function core(o: BenchOptions, plain: Redis, pipelined: Redis): Promise<NonNullable<Results['core']>> {
  const bare = await bareScripts(plain, `${prefix}:bare`);
  const barePipelined = await bareScripts(pipelined, `${prefix}:bare-ap`);
  // The bare client coalescing its writes as the store does: what coalescing gains apart from the library.
  const bareCoalesced = await bareScripts(
    plain,
    `${prefix}:bare-cw`,
    'bench',
    DEFAULT_MAX_COMMANDS_PER_WRITE,
  );
  const run = ours(plain, `${prefix}:ours`);
  // The store writing each call at once: what coalescing gains the library.
  const runEachWrite = ours(plain, `${prefix}:ours-1w`, 'Idempotency.run, maxCommandsPerWrite: 1', {
    maxCommandsPerWrite: 1,
  });
  // The store as a user gets it on an auto-pipelining client: its own coalescing on as well.
  const runPipelined = ours(pipelined, `${prefix}:ours-ap`, 'Idempotency.run, auto-pipelining on');
  Object.assign(barePipelined, { name: 'bare EVALSHA, auto-pipelining on' });
  Object.assign(bareCoalesced, {
    name: `bare EVALSHA, ${DEFAULT_MAX_COMMANDS_PER_WRITE} commands per write`,
  });
  const all = [bare, run, runEachWrite, bareCoalesced, barePipelined, runPipelined];
  // Warm-up: script cache, connections, JIT.
  await measureRounds(all, 1, 2_000, o.inFlight, 'warm');
  const meter = new CpuMeter(plain);

  const concurrent = await measureRounds(all, o.rounds, o.concurrentMessages, o.inFlight, 'conc', meter);
  out(seriesTable(`new keys, ${o.inFlight} in flight`, concurrent, 'msg/s vs bare'));
  const duplicates = await measureRounds(
    [bareClaimOnly(bare), run, runEachWrite, bareClaimOnly(bareCoalesced, bareCoalesced.name)],
    o.rounds,
    o.concurrentMessages,
    o.inFlight,
    'conc',
    meter,
  );
  out(seriesTable(`duplicates, ${o.inFlight} in flight`, duplicates, 'msg/s vs bare'));
  const sequential = await measureRounds(
    [bare, run, runEachWrite],
    o.rounds,
    o.sequentialMessages,
    1,
    'seq',
    meter,
  );
  out(seriesTable('new keys, sequential', sequential, 'msg/s vs bare'));
  const sequentialDuplicates = await measureRounds(
    [bareClaimOnly(bare), run],
    o.rounds,
    o.sequentialMessages,
    1,
    'seq',
    meter,
  );
  out(seriesTable('duplicates, sequential', sequentialDuplicates, 'msg/s vs bare'));
  const handoff = [
    await measureHandoff(plain, prefix, o.quick ? 30 : 150, true),
    await measureHandoff(plain, prefix, o.quick ? 30 : 150, false),
  ];
  out(handoffTable(handoff));
  return { concurrent, sequential, duplicates, sequentialDuplicates, handoff };
}

async function peers(o: BenchOptions, plain: Redis): Promise<NonNullable<Results['peers']>> {
  // Powertools warns on every call without a Lambda context ("Could not determine remaining time left");
  // count the warnings instead of flooding the tables.
  const warn = console.warn;
  let warnings = 0;
  console.warn = () => {
    warnings++;
  };
  const opened: Contender[] = [];
  const open = async <C extends Contender>(c: Promise<C>) => {
    const contender = await c;
    opened.push(contender);
    return contender;
  };
  const clients: Redis[] = [];
  /** Another ioredis connection, so that racing callers do not share one socket. */
  const connection = async () => {
    const redis = await connectRedis(false);
    clients.push(redis);
    return redis;
  };
  try {
    const contenders = [
      ours(plain, `${prefix}:p-ours`),
      await open(powertools(`${prefix}:p-pt`)),
      await open(powertools(`${prefix}:p-ptc`, { lambdaRemainingMs: 30_000 })),
      await open(messageQueueToolkit(plain, `${prefix}:p-mqt`)),
    ];
    await measureRounds(contenders, 1, 500, o.inFlight, 'warm');
    const meter = new CpuMeter(plain);
    // The same keys twice: new the first time, completed (duplicates) the second.
    const pass = () => measureRounds(contenders, o.peerRounds, o.peerMessages, o.inFlight, 'conc', meter);
    const concurrent = await pass();
    out(seriesTable(`peers, new keys, ${o.inFlight} in flight`, concurrent, 'msg/s vs ours'));
    const duplicates = await pass();
    out(seriesTable(`peers, duplicates, ${o.inFlight} in flight`, duplicates, 'msg/s vs ours'));

    // Races: 4 instances (connections) per contender, 16 callers on each of 200 keys.
    const lease = 1_000;
    const raceRows: NonNullable<Results['peers']>['race'] = [];
    const makers: [string, () => Promise<Contender>, () => Promise<{ owner: Contender; unstall(): void }>][] =
      [
        [
          contenders[0]!.name,
          async () => ours(await connection(), `${prefix}:r-ours`),
          async () => {
            const stalled = stalledHeartbeats(
              new RedisIdempotencyStore({ redis: plain }, { keyPrefix: `${prefix}:s-ours` }),
            );
            return {
              owner: new Ours('owner', stalled.store, 'bench', { leaseMs: lease }),
              unstall: stalled.unstall,
            };
          },
        ],
        [
          contenders[1]!.name,
          () => open(powertools(`${prefix}:r-pt`)),
          async () => ({
            owner: await open(powertools(`${prefix}:s-pt`, { expiresAfterSeconds: 1 })),
            unstall() {},
          }),
        ],
        [
          contenders[2]!.name,
          () => open(powertools(`${prefix}:r-ptc`, { lambdaRemainingMs: 30_000 })),
          async () => ({
            owner: await open(powertools(`${prefix}:s-ptc`, { lambdaRemainingMs: lease })),
            unstall() {},
          }),
        ],
        [
          contenders[3]!.name,
          async () => open(messageQueueToolkit(await connection(), `${prefix}:r-mqt`)),
          async () => ({
            owner: await open(
              messageQueueToolkit(plain, `${prefix}:s-mqt`, {
                lockTimeoutSeconds: 1,
                refreshIntervalSeconds: 60,
              }),
            ),
            unstall() {},
          }),
        ],
      ];
    const takers: Record<number, () => Promise<Contender>> = {
      0: async () =>
        new Ours('taker', new RedisIdempotencyStore({ redis: plain }, { keyPrefix: `${prefix}:s-ours` })),
      1: () => open(powertools(`${prefix}:s-pt`, { expiresAfterSeconds: 1 })),
      2: () => open(powertools(`${prefix}:s-ptc`, { lambdaRemainingMs: lease })),
      3: () =>
        open(
          messageQueueToolkit(plain, `${prefix}:s-mqt`, {
            lockTimeoutSeconds: 1,
            refreshIntervalSeconds: 60,
          }),
        ),
    };
    const stalls = await Promise.all(
      makers.map(async ([, , makeOwner], i) => {
        const { owner, unstall } = await makeOwner();
        return stalledOwner(owner, await takers[i]!(), 'stalled-key', lease, unstall);
      }),
    );
    for (const [i, [name, make]] of makers.entries()) {
      const instances = await Promise.all([make(), make(), make(), make()]);
      raceRows.push({
        name,
        race: await race(instances, 'race', o.raceKeys, o.raceCallers),
        stalled: stalls[i]!,
      });
    }
    out(raceTable(raceRows));
    if (warnings > 0) out(`(peer libraries printed ${warnings} warnings, suppressed)`);
    return { concurrent, duplicates, race: raceRows };
  } finally {
    console.warn = warn;
    await Promise.all(opened.map((c) => c.close().catch(() => {})));
    await Promise.all(clients.map((c) => c.quit().catch(() => {})));
  }
}

async function adapters(o: BenchOptions, plain: Redis): Promise<NonNullable<Results['adapters']>> {
  const idempotency = new Idempotency(
    { store: new RedisIdempotencyStore({ redis: plain }, { keyPrefix: `${prefix}:adapters` }) },
    { leaseMs: 30_000, retentionMs: 600_000 },
  );
  const meter = new CpuMeter(plain);
  // The scripts alone around each adapter's handler, writes coalesced as the store does: the floor.
  const scripts = await bareScripts(
    plain,
    `${prefix}:adapters-bare`,
    'bench',
    DEFAULT_MAX_COMMANDS_PER_WRITE,
  );
  const rows: AdapterRow[] = [];
  const rounds: Record<string, AdapterRow[]> = {};
  const skipped: string[] = [];
  const benches: [string, number, (messages: number) => Promise<AdapterRow>][] = [
    ['RabbitMQ', o.adapterMessages.rabbitmq, (n) => benchRabbitmq(idempotency, scripts, n, meter)],
    ['Kafka', o.adapterMessages.kafka, (n) => benchKafka(idempotency, scripts, n, meter)],
    ['SQS', o.adapterMessages.sqs, (n) => benchSqs(idempotency, scripts, n, meter)],
    ['BullMQ', o.adapterMessages.bullmq, (n) => benchBullmq(idempotency, scripts, n, meter)],
    ['NATS', o.adapterMessages.nats, (n) => benchNats(idempotency, scripts, n, meter)],
  ];
  for (const [name, messages, bench] of benches) {
    try {
      // A warm-up pass first: both sides' code compiled, the broker's connections and queues exercised.
      await bench(Math.ceil(messages / 5));
      const measured: AdapterRow[] = [];
      for (let r = 0; r < o.adapterRounds; r++) measured.push(await bench(messages));
      rounds[name] = measured;
      rows.push(medianRow(measured));
    } catch (error) {
      skipped.push(`${name}: ${(error as Error).message}`);
    }
  }
  out(adapterTable(rows));
  for (const s of skipped) out(`skipped ${s}`);
  return { rows, rounds, skipped };
}

/** The pass whose SDK ÷ bare ratio is the median of the passes (the lower middle one of an even count). */
function medianRow(measured: readonly AdapterRow[]): AdapterRow {
  const sorted = [...measured].sort((a, b) => a.ratio - b.ratio);
  return sorted[(sorted.length - 1) >> 1]!;
}

async function memory(o: BenchOptions): Promise<NonNullable<Results['memory']>> {
  let server: Awaited<ReturnType<typeof startPrivateRedis>>;
  try {
    server = await startPrivateRedis();
  } catch (error) {
    const skipped = `memory needs a private redis-server: ${(error as Error).message}`;
    out(`skipped ${skipped}`);
    return { skipped };
  }
  const saved = process.env.REDIS_URL;
  process.env.REDIS_URL = server.url;
  try {
    const redis = new Redis(server.url);
    try {
      const rows = await measureMemory(redis, o.memoryRecords);
      out(memoryTable(rows));
      return { records: o.memoryRecords, rows };
    } finally {
      redis.disconnect();
    }
  } finally {
    if (saved === undefined) delete process.env.REDIS_URL;
    else process.env.REDIS_URL = saved;
    await server.stop();
  }
}

function targets(r: Results): Target[] {
  const t: Target[] = [];
  const find = (s: Series[] | undefined, name: string) => s?.find((x) => x.name.startsWith(name));
  const pct = (v: number) => `${(v * 100).toFixed(0)}%`;
  if (r.core) {
    const conc = find(r.core.concurrent, 'idempotent-consumer')!;
    const seq = find(r.core.sequential, 'idempotent-consumer')!;
    const dup = find(r.core.duplicates, 'idempotent-consumer')!;
    t.push({ target: 'run ≥ 85% of bare, 50 in flight', measured: pct(conc.ratio), met: conc.ratio >= 0.85 });
    t.push({ target: 'run ≥ 90% of bare, sequential', measured: pct(seq.ratio), met: seq.ratio >= 0.9 });
    t.push({
      target: 'run p99 ≤ 1.2× bare (50 in flight)',
      measured: `${conc.p99Ratio.toFixed(2)}×`,
      met: conc.p99Ratio <= 1.2,
    });
    t.push({
      target: 'run p99 ≤ 1.2× bare (sequential)',
      measured: `${seq.p99Ratio.toFixed(2)}×`,
      met: seq.p99Ratio <= 1.2,
    });
    t.push({ target: 'duplicate ≥ 90% of a bare claim', measured: pct(dup.ratio), met: dup.ratio >= 0.9 });
  }
  if (r.peers) {
    for (const s of r.peers.concurrent.slice(1)) {
      const times = 1 / s.ratio;
      const pt = s.name.startsWith('Powertools');
      t.push({
        target: pt ? `≥ 2× ${s.name}` : `ahead of ${s.name}`,
        measured: `${times.toFixed(2)}×`,
        met: pt ? times >= 2 : times > 1,
      });
    }
    const mine = r.peers.race[0]!;
    t.push({
      target: 'race: handler once per key',
      measured: `${mine.race.runs} runs for ${mine.race.keys} keys`,
      met: mine.race.runs === mine.race.keys,
    });
    t.push({
      target: "stalled owner: duplicate gets the taker's result",
      measured: mine.stalled,
      met: mine.stalled === 'taker',
    });
  }
  if (r.claimMany) {
    for (const c of r.claimMany) {
      t.push({
        target: `claimMany(${c.batch}): one round trip`,
        measured: c.writesPerCall.toFixed(2),
        met: c.writesPerCall <= 1,
      });
    }
  }
  for (const a of r.adapters?.rows ?? []) {
    t.push({
      target: `${a.broker}: SDK ≥ 2/3 of bare`,
      measured: `${pct(a.ratio)} (scripts alone ${pct(a.scriptsRatio)}, SDK ÷ them ${pct(a.sdkOverScripts)})`,
      met: a.ratio >= 2 / 3,
    });
  }
  for (const g of r.http ?? []) {
    const [bare, mine, ...peers] = g.concurrent;
    const seqMine = g.sequential[1]!;
    if (!bare || !mine) continue;
    t.push({
      target: `${g.framework}: ours ≥ 0.55× bare, 32 in flight`,
      measured: `${mine.ratio.toFixed(2)}×`,
      met: mine.ratio >= 0.55,
    });
    const added = g.addedP50Us[mine.name] ?? Number.NaN;
    t.push({
      target: `${g.framework}: sequential p50 added ≤ 550 µs`,
      measured: `${added.toFixed(0)} µs (${seqMine.ratio.toFixed(2)}× bare req/s)`,
      met: added <= 550,
    });
    for (const [i, peer] of peers.entries()) {
      const seqPeer = g.sequential[i + 2]!;
      t.push({
        target: `${g.framework}: ours ahead of ${peer.name.replace(/^.*\+ /, '')}`,
        measured: `${(mine.ratio / peer.ratio).toFixed(2)}× in flight, ${(seqMine.ratio / seqPeer.ratio).toFixed(2)}× sequential`,
        met: mine.ratio > peer.ratio && seqMine.ratio > seqPeer.ratio,
      });
    }
    const race = g.race[0]?.race;
    if (race) {
      t.push({
        target: `${g.framework}: race, handler once per key`,
        measured: `${race.runs} runs for ${race.keys} keys`,
        met: race.runs === race.keys,
      });
    }
  }
  if (r.memory && 'rows' in r.memory) {
    const [small, fp] = r.memory.rows;
    const ratio = (m: MemoryRow) => m.usedMemoryPerRecord / m.referencePerRecord;
    if (small)
      t.push({
        target: 'memory ≤ 1.15× string key',
        measured: `${ratio(small).toFixed(2)}×`,
        met: ratio(small) <= 1.15,
      });
    if (fp)
      t.push({
        target: 'memory ≤ 1.35× with fingerprint',
        measured: `${ratio(fp).toFixed(2)}×`,
        met: ratio(fp) <= 1.35,
      });
  }
  return t;
}

async function main(): Promise<void> {
  const o = parseOptions(process.argv.slice(2));
  const started = Date.now();
  let plain: Redis;
  let pipelined: Redis;
  try {
    plain = await connectRedis(false);
    pipelined = await connectRedis(true);
  } catch (error) {
    process.stderr.write(`bench: cannot reach Redis at ${redisUrl}: ${(error as Error).message}\n`);
    process.stderr.write('Start one (redis-server --port 6379) or set REDIS_URL.\n');
    process.exit(1);
  }
  const version = /redis_version:(\S+)/.exec(await plain.info('server'))?.[1] ?? '?';
  const machine = {
    node: process.version,
    cpus: `${cpus().length} × ${cpus()[0]?.model.trim()}`,
    memoryGiB: Math.round(totalmem() / 2 ** 30),
    loadAverage: loadavg().map((l) => Number(l.toFixed(2))),
    redis: version,
  };
  out(
    `idempotent-consumer bench${o.quick ? ' (quick)' : ''}: Redis ${version} at ${redisUrl}, Node ${process.version}, ` +
      `${machine.cpus}, load ${machine.loadAverage.join(' ')}\n`,
  );
  const results: Results = {};
  const sectionSeconds: Record<string, number> = {};
  const section = async (name: Section, body: () => Promise<void>) => {
    if (!o.sections.includes(name)) return;
    const t = Date.now();
    await body();
    sectionSeconds[name] = (Date.now() - t) / 1000;
    out(`(${name}: ${sectionSeconds[name].toFixed(1)} s)\n`);
  };
  try {
    await section('core', async () => {
      results.core = await core(o, plain, pipelined);
    });
    await section('peers', async () => {
      results.peers = await peers(o, plain);
    });
    await section('claimMany', async () => {
      results.claimMany = [
        await measureClaimMany(plain, prefix, 10, o.quick ? 200 : 1_000),
        await measureClaimMany(plain, prefix, 100, o.quick ? 30 : 200),
      ];
      out(claimManyTable(results.claimMany));
    });
    await section('adapters', async () => {
      results.adapters = await adapters(o, plain);
    });
    await section('memory', async () => {
      results.memory = await memory(o);
    });
    await section('http', async () => {
      const http = { ...o.http, raceKeys: o.raceKeys, raceCallers: o.raceCallers };
      results.http = await benchHttp(http, plain, redisUrl, prefix, new CpuMeter(plain), o.http.frameworks);
      out(httpTable(results.http));
      out(httpRaceTable(results.http));
    });
  } finally {
    await deleteByPrefix(plain, prefix);
    await Promise.all([plain.quit(), pipelined.quit()]);
  }
  const t = targets(results);
  out(targetTable(t));
  const seconds = (Date.now() - started) / 1000;
  out(`Total bench time ${seconds.toFixed(1)} s.`);
  mkdirSync(dirname(o.out), { recursive: true });
  const date = new Date().toISOString();
  writeFileSync(
    o.out,
    `${JSON.stringify({ date, quick: o.quick, seconds, sectionSeconds, machine, targets: t, ...results }, null, 2)}\n`,
  );
  out(`Wrote ${o.out}.`);
  // A full run joins the history beside latest.json: date, commit, machine and every ratio.
  if (!o.quick && SECTIONS.every((s) => o.sections.includes(s))) {
    const record = { date, ...checkout(), seconds, machine, ratios: ratiosOf(results), targets: t };
    out(`Wrote ${writeRunRecord(dirname(o.out), record)}.`);
  }
}

main().catch((error: unknown) => {
  process.stderr.write(`bench failed: ${(error as Error).stack ?? String(error)}\n`);
  process.exit(1);
});
