/**
 * `node --cpu-prof --cpu-prof-dir=bench/results/profiles bench/dist/profile.js [run|bare|run-duplicate|bare-duplicate] [messages] [in flight]`:
 * `Idempotency.run` of a no-op handler (or the bare EVALSHA client) at 50 (or the given number) in flight on new keys, alone in
 * the process, so a CPU profile shows where the time per message goes (bench/README.md, "Where the time goes").
 * The `-duplicate` modes first complete the keys, then measure only the duplicates of them (the bare
 * client sends its claim alone, as the `duplicates` table's reference does).
 */
import { type BareScripts, bareScripts } from './bare-scripts';
import { noopHandler } from './contender';
import { concurrent } from './measure';
import { ours } from './ours';
import { connectRedis, deleteByPrefix } from './redis';
import { bareClaimOnly } from './throughput';

async function main(): Promise<void> {
  const which = process.argv[2] ?? 'run';
  const count = Number(process.argv[3] ?? 30_000);
  const inFlight = Number(process.argv[4] ?? 50);
  const prefix = `bench-profile:${process.pid}`;
  const redis = await connectRedis(false);
  try {
    const bare = which.startsWith('bare');
    const contender = bare ? await bareScripts(redis, prefix) : ours(redis, prefix);
    const duplicates = which.endsWith('-duplicate');
    const measured = duplicates && bare ? bareClaimOnly(contender as BareScripts) : contender;
    await concurrent(2_000, 50, (i) => contender.process(`warm-${i}`, noopHandler));
    if (duplicates) await concurrent(count, inFlight, (i) => contender.process(`k-${i}`, noopHandler));
    const cpuBefore = process.cpuUsage();
    const stats = await concurrent(count, inFlight, (i) => measured.process(`k-${i}`, noopHandler));
    const cpu = process.cpuUsage(cpuBefore);
    // CPU time per message: steadier than msg/s on a shared machine (other processes take the cores, not
    // this process's instructions).
    const cpuUs = (cpu.user + cpu.system) / count;
    process.stdout.write(
      `${measured.name}: ${Math.round(stats.perSecond)} msg/s, p99 ${Math.round(stats.p99Us)} µs, CPU ${cpuUs.toFixed(1)} µs/msg\n`,
    );
  } finally {
    await deleteByPrefix(redis, prefix);
    await redis.quit();
  }
}

void main();
