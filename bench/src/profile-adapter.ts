/**
 * `node --cpu-prof --cpu-prof-dir=bench/results/profiles bench/dist/profile-adapter.js <rabbitmq|kafka|sqs|nats> [messages]`:
 * one adapter row of the `adapters` section (the bare broker client, the same with the bare scripts, then
 * the adapter) alone in the process, so a CPU profile shows where the adapter's time per message goes
 * (bench/README.md, "What limits each adapter row").
 */
import { Idempotency, RedisIdempotencyStore } from '@idempotent-consumer/core';
import { DEFAULT_MAX_COMMANDS_PER_WRITE } from '@idempotent-consumer/core/tools';
import { benchKafka } from './adapters/kafka';
import { benchNats } from './adapters/nats';
import { benchRabbitmq } from './adapters/rabbitmq';
import { benchSqs } from './adapters/sqs';
import { bareScripts } from './bare-scripts';
import { CpuMeter } from './cpu-meter';
import { connectRedis, deleteByPrefix } from './redis';

async function main(): Promise<void> {
  const which = process.argv[2] ?? 'kafka';
  const count = Number(process.argv[3] ?? 3_000);
  const prefix = `bench-profile-adapter:${process.pid}`;
  const redis = await connectRedis(false);
  const idempotency = new Idempotency(
    { store: new RedisIdempotencyStore({ redis }, { keyPrefix: prefix }) },
    { leaseMs: 30_000, retentionMs: 600_000 },
  );
  try {
    const benches = { rabbitmq: benchRabbitmq, sqs: benchSqs, nats: benchNats, kafka: benchKafka };
    const bench = benches[which as keyof typeof benches] ?? benchKafka;
    const scripts = await bareScripts(redis, `${prefix}-bare`, 'bench', DEFAULT_MAX_COMMANDS_PER_WRITE);
    const row = await bench(idempotency, scripts, count, new CpuMeter(redis));
    process.stdout.write(`${JSON.stringify(row)}\n`);
  } finally {
    await deleteByPrefix(redis, prefix);
    await redis.quit();
  }
}

void main();
