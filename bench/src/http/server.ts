import { setTimeout as sleep } from 'node:timers/promises';

/** The frameworks the HTTP section measures. */
export type Framework = 'Express' | 'Fastify' | 'Hono' | 'NestJS';

/**
 * One server under test: a framework's route with or without an idempotency layer, on 127.0.0.1. Every
 * server has the same two routes: `POST /orders`, which answers 201 with a small JSON body at once, and
 * `POST /race`, which counts its runs per `Idempotency-Key`, waits 5 ms and answers 201.
 */
export interface BenchServer {
  readonly name: string;
  readonly framework: Framework;
  readonly url: string;
  /** Runs of the `/race` handler by key. */
  readonly raceRuns: Map<string, number>;
  close(): Promise<void>;
}

/** What the `/orders` handler answers (with status 201). */
export const ORDER = { id: 'order-1', status: 'created' } as const;

/** The `/race` handler's work: counts the run of `key`, then waits so that the racing calls overlap. */
export async function raceWork(runs: Map<string, number>, key: string | undefined): Promise<void> {
  const k = key ?? '';
  runs.set(k, (runs.get(k) ?? 0) + 1);
  await sleep(5);
}
