/**
 * A claimer process for the race suite (integration-tests/src/core/race.test.ts). Started with
 * `node --import tsx`; talks to the suite over IPC:
 *   worker → {type:'ready'} once its connections are up and the scripts are loaded;
 *   suite  → {type:'go', atMs} to fire every claim at one wall-clock instant (the barrier);
 *   worker → {type:'done', outcomes} with, per key, how many times each outcome was seen.
 * Mode `claim` races bare `store.claim`; mode `run` races `Idempotency.run` whose handler counts its side
 * effect in Redis (`INCR <prefix>:side:<key>`).
 */
import Redis from 'ioredis';
import { Idempotency, RedisIdempotencyStore } from '../../packages/core/src';

export interface RaceWorkerConfig {
  readonly mode: 'claim' | 'run';
  readonly url: string;
  readonly prefix: string;
  readonly keys: number;
  /** Claimers per key in this process. */
  readonly claimersPerKey: number;
  /** ioredis connections in this process; claimers are spread over them round-robin. */
  readonly connections: number;
  /** How long a `run` handler holds its claim, in ms. */
  readonly handlerMs: number;
  /** Where this process starts in the key list (keys are visited in a rotated order). */
  readonly startKey: number;
}

export type RaceWorkerMessage =
  | { type: 'ready' }
  | { type: 'done'; outcomes: Record<string, Record<string, number>>; errors: string[] };

const config = JSON.parse(process.env.RACE_WORKER_CONFIG ?? '{}') as RaceWorkerConfig;
const send = (message: RaceWorkerMessage) => process.send!(message);

async function main(): Promise<void> {
  const clients = Array.from(
    { length: config.connections },
    (_, i) =>
      new Redis(config.url, {
        enableAutoPipelining: i % 2 === 1,
        connectionName: `race-${process.pid}-${i}`,
      }),
  );
  // A generous command timeout: the suite checks atomicity, and a claim that timed out on our side while
  // thousands queue on a loaded machine would only be an ambiguous answer, not a finding.
  const stores = clients.map(
    (redis) => new RedisIdempotencyStore({ redis }, { keyPrefix: config.prefix, commandTimeoutMs: 30_000 }),
  );
  const runners = stores.map(
    (store) => new Idempotency({ store }, { leaseMs: 10_000, retentionMs: 600_000 }),
  );
  // Warm up: connect and load the scripts on every connection, so the race is not a race to connect.
  await Promise.all(
    stores.map((s, i) =>
      s.claim({ scope: 'warmup', key: `${process.pid}-${i}` }, { leaseMs: 1, retentionMs: 1000 }),
    ),
  );

  const go = new Promise<number>((resolve) =>
    process.on('message', (m: { type: string; atMs: number }) => m.type === 'go' && resolve(m.atMs)),
  );
  send({ type: 'ready' });
  const atMs = await go;
  // Sleep until just before the instant, then spin: a timer alone can fire milliseconds late.
  await new Promise((r) => setTimeout(r, Math.max(0, atMs - Date.now() - 20)));
  while (Date.now() < atMs) {
    // spin
  }

  const outcomes: Record<string, Record<string, number>> = {};
  const errors: string[] = [];
  const count = (key: string, outcome: string) => {
    const perKey = outcomes[key] ?? {};
    outcomes[key] = perKey;
    perKey[outcome] = (perKey[outcome] ?? 0) + 1;
  };
  const calls: Promise<void>[] = [];
  let n = 0;
  for (let j = 0; j < config.claimersPerKey; j++) {
    for (let i = 0; i < config.keys; i++) {
      const k = (i + config.startKey) % config.keys;
      const c = n++ % clients.length;
      const id = { scope: 'race', key: `k${k}` };
      const call =
        config.mode === 'claim'
          ? stores[c]!.claim(id, { leaseMs: 10_000, retentionMs: 600_000, fingerprint: 'f'.repeat(64) }).then(
              (r) => count(id.key, r.outcome),
            )
          : runners[c]!.run(id, async () => {
              await clients[c]!.incr(`${config.prefix}:side:${id.key}`);
              await new Promise((r) => setTimeout(r, config.handlerMs));
              return process.pid;
            }).then((r) => count(id.key, 'status' in r ? `${r.outcome}/${r.status}` : r.outcome));
      calls.push(call.catch((e: unknown) => void errors.push(String(e))));
    }
  }
  await Promise.all(calls);
  send({ type: 'done', outcomes, errors });
  await Promise.all(clients.map((c) => c.quit()));
}

main().catch((error: unknown) => {
  process.stderr.write(`race worker failed: ${String(error)}\n`);
  process.exit(1);
});
