/**
 * `node bench/dist/script-cost.js [lua dir …]`: the server time per `EVALSHA` of `claim.lua` + `complete.lua`
 * (new keys, 10,000 pairs pipelined 50 at a time, without and with a fingerprint), from `INFO
 * commandstats` on a private `redis-server`, for each `lua/` directory given (default: this repository's),
 * e.g. an older checkout's to compare. Server time is what the bare-scripts
 * reference and `Idempotency.run` share, and what bounds both when Redis is the busy side.
 */
import { createHash } from 'node:crypto';
import Redis from 'ioredis';
import { LUA_DIR, luaSource } from './lua-source';
import { startPrivateRedis } from './private-redis';

async function main(): Promise<void> {
  const dirs = process.argv.slice(2);
  if (dirs.length === 0) dirs.push(LUA_DIR);
  const server = await startPrivateRedis();
  const redis = new Redis(server.url);
  try {
    for (const dir of dirs) {
      const claim = (await redis.script('LOAD', luaSource('claim', dir))) as string;
      const complete = (await redis.script('LOAD', luaSource('complete', dir))) as string;
      const cost: string[] = [];
      for (const withFingerprint of [false, true]) {
        await redis.config('RESETSTAT');
        for (let batch = 0; batch < 200; batch++) {
          const keys = Array.from({ length: 50 }, (_, i) => `${dir}:${withFingerprint}:${batch}:${i}`);
          const claims = redis.pipeline();
          for (const key of keys) {
            const fp = withFingerprint ? createHash('sha256').update(key).digest() : undefined;
            claims.evalsha(
              claim,
              1,
              key,
              30_000,
              600_000,
              fp?.toString('hex') ?? '',
              5,
              '0',
              fp?.toString('base64').replace(/=+$/, '') ?? '',
            );
          }
          const replies = (await claims.exec())!;
          const completes = redis.pipeline();
          replies.forEach(([error, reply], i) => {
            if (error) throw error;
            completes.evalsha(
              complete,
              1,
              keys[i]!,
              (reply as unknown[])[1] as number,
              600_000,
              '1',
              'j{"ok":true}',
            );
          });
          await completes.exec();
        }
        const stats = /cmdstat_evalsha:calls=(\d+),usec=(\d+)/.exec(await redis.info('commandstats'))!;
        cost.push(
          `${(Number(stats[2]) / Number(stats[1])).toFixed(2)} µs${withFingerprint ? ' with a fingerprint' : ''}`,
        );
      }
      process.stdout.write(
        `${dir}: server time per EVALSHA (claim and complete alike): ${cost.join(', ')}\n`,
      );
    }
  } finally {
    redis.disconnect();
    await server.stop();
  }
}

void main();
