/**
 * `node bench/dist/library-cost.js [new|duplicate] [rounds] [core build …]`: the library's own JavaScript per
 * `Idempotency.run` of a no-op handler, without a socket or a server. A fake client answers every
 * `EVALSHA` at once (a claim: ACQUIRED, or DUPLICATE with a small result; a completion: OK), so what is
 * timed is the runner, the store and the result codec, against the same steps written inline (what the bare
 * reference does in JavaScript). 50 runs in flight, 20,000 per round, contenders alternating round by round;
 * prints the median and quartiles of ns per run. Each extra argument is the path of another build of
 * `@idempotent-consumer/core` (an older checkout's `packages/core/dist`), measured in the same rounds, so a
 * change is compared in one process.
 */
import { resolve } from 'node:path';
import type * as Core from '@idempotent-consumer/core';

type Variant = (key: string) => Promise<unknown>;

const IN_FLIGHT = 50;
const PER_ROUND = 20_000;
let token = 1_795_527_009_752_001;

/** A claim reply of lua/claim.lua, or a completion's; arguments as the store sends them (6 for a claim). */
function fakeEvalsha(duplicate: boolean) {
  return (_sha: string, _keys: number, _key: string, ...args: unknown[]): Promise<unknown[]> => {
    if (args.length !== 6) return Promise.resolve(['OK', 1_795_527_009_752]);
    return Promise.resolve(
      duplicate
        ? ['DUPLICATE', token, 1, 1, 'j{"ok":true}', 1_795_527_009_999]
        : ['ACQUIRED', ++token, 1, 1_795_527_039_752, 1_795_527_009_752, 1],
    );
  };
}

/** `Idempotency.run` of a no-op handler through `core`, on a store whose client is the fake. */
function ours(core: typeof Core, duplicate: boolean): Variant {
  const redis = { isCluster: false, options: {}, defineCommand() {}, evalsha: fakeEvalsha(duplicate) };
  const store = new core.RedisIdempotencyStore({ redis: redis as unknown as Core.RedisClient });
  const idempotency = new core.Idempotency({ store }, { leaseMs: 30_000, retentionMs: 600_000 });
  const handler = async () => ({ ok: true });
  return async (key) => {
    const r = await idempotency.run({ scope: 'bench', key }, handler);
    return 'result' in r ? r.result : undefined;
  };
}

/** The same steps inline: claim, decode, handler, encode, complete (or the duplicate's decode). */
function inline(duplicate: boolean): Variant {
  const evalsha = fakeEvalsha(duplicate);
  const handler = async () => ({ ok: true });
  return async (key) => {
    const reply = await evalsha('sha', 1, `bench:5:bench:${key}`, 30_000, 600_000, '', 0, '0', '');
    if (reply[0] === 'DUPLICATE') return JSON.parse((reply[4] as string).slice(1));
    const value = await handler();
    await evalsha('sha', 1, `bench:5:bench:${key}`, reply[1], 600_000, '1', `j${JSON.stringify(value)}`);
    return value;
  };
}

/** ns per run of one round: `PER_ROUND` runs, `IN_FLIGHT` at a time. */
async function round(variant: Variant, roundNumber: number): Promise<number> {
  const started = process.hrtime.bigint();
  let next = 0;
  await Promise.all(
    Array.from({ length: IN_FLIGHT }, async () => {
      while (next < PER_ROUND) await variant(`k-${roundNumber}-${next++}`);
    }),
  );
  return Number(process.hrtime.bigint() - started) / PER_ROUND;
}

async function main(): Promise<void> {
  const duplicate = (process.argv[2] ?? 'new') === 'duplicate';
  const rounds = Number(process.argv[3] ?? 20);
  const variants: [string, Variant][] = [
    ['inline (no library)', inline(duplicate)],
    ['this build', ours(require('@idempotent-consumer/core'), duplicate)],
    ...process.argv
      .slice(4)
      .map((path): [string, Variant] => [path, ours(require(resolve(path)), duplicate)]),
  ];
  const times = variants.map(() => [] as number[]);
  for (let r = 0; r < rounds; r++) {
    for (const [i, [, variant]] of variants.entries()) times[i]!.push(await round(variant, r));
  }
  for (const [i, [name]] of variants.entries()) {
    // The first three rounds warm the JIT up.
    const sorted = times[i]!.slice(3).sort((a, b) => a - b);
    const at = (q: number) => sorted[Math.floor(q * (sorted.length - 1))]!.toFixed(0);
    process.stdout.write(
      `${duplicate ? 'duplicate' : 'new key'}, ${name}: median ${at(0.5)} ns per run (quartiles ${at(0.25)}–${at(0.75)})\n`,
    );
  }
}

void main();
