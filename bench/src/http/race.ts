import { BenchClient } from './client';
import type { BenchServer } from './server';

/** What happened when `callers` HTTP clients raced on each of `keys` idempotency keys. */
export interface HttpRaceResult {
  readonly keys: number;
  readonly callers: number;
  /** Runs of the handler in total: a layer that runs each key once has `runs === keys`. */
  readonly runs: number;
  /** Keys whose handler ran more than once. */
  readonly keysRunTwice: number;
  /** Answers by status (a replay counts under its status). */
  readonly statuses: Record<string, number>;
  /** Requests that failed without an answer (a reset connection). */
  readonly errors: number;
}

/**
 * `callers` requests for each of `keys` keys, all sent before any is answered (one connection each, up to
 * 512 at once), to `POST /race`, whose handler takes 5 ms: how often did the handler run per key?
 */
export async function httpRace(
  server: BenchServer,
  keyPrefix: string,
  keys: number,
  callers: number,
): Promise<HttpRaceResult> {
  const client = new BenchClient(server.url, Math.min(512, keys * callers));
  const statuses: Record<string, number> = {};
  let errors = 0;
  try {
    const calls: Promise<void>[] = [];
    for (let k = 0; k < keys; k++) {
      for (let c = 0; c < callers; c++) {
        calls.push(
          client.post('/race', `${keyPrefix}-${k}`).then(
            (a) => {
              statuses[a.status] = (statuses[a.status] ?? 0) + 1;
            },
            () => {
              errors++;
            },
          ),
        );
      }
    }
    await Promise.all(calls);
  } finally {
    await client.close();
  }
  let runs = 0;
  let twice = 0;
  for (const [key, n] of server.raceRuns) {
    if (!key.startsWith(keyPrefix)) continue;
    runs += n;
    if (n > 1) twice++;
  }
  return { keys, callers, runs, keysRunTwice: twice, statuses, errors };
}
