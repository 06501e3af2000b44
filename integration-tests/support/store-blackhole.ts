import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import type { IdempotencyRecord } from '@idempotent-consumer/core';
import Redis from 'ioredis';
import { waitFor } from './net';
import { RedisProxy } from './redis-proxy';
import { RedisServer } from './redis-server';

/** How long the suites drop packets, and the store's `commandTimeoutMs` there. */
export const OUTAGE_MS = 8_000;
export const COMMAND_TIMEOUT_MS = 500;
/** The runners' lease: longer than the outage, so a message that waited a lease would show. */
export const LEASE_MS = 15_000;

/** What {@link useBlackholedRedis} gives a suite; read its fields inside tests. */
export interface BlackholedRedis {
  /** The proxy the store's client goes through. */
  readonly proxy: RedisProxy;
  /** A client of the suite's Redis past the proxy, to read records back. */
  readonly direct: Redis;
  /** This test's store client, through the proxy, with ioredis's defaults (the package READMEs' client). */
  readonly storeRedis: Redis;
}

/**
 * Starts a private redis-server and a {@link RedisProxy} in front of it for the calling `describe`, a
 * direct client of it, and before each test a store client through the proxy; after each test the proxy
 * forwards again and the store client is disconnected. Call it after the suite's own fixture hooks.
 */
export function useBlackholedRedis(): BlackholedRedis {
  const handle = {} as { server: RedisServer; proxy: RedisProxy; direct: Redis; storeRedis: Redis };
  beforeAll(async () => {
    handle.server = await RedisServer.start();
    handle.proxy = await RedisProxy.start(handle.server.port);
    handle.direct = new Redis(handle.server.url);
  });
  beforeEach(() => {
    handle.storeRedis = new Redis(handle.proxy.url);
    handle.storeRedis.on('error', () => {});
  });
  afterEach(() => {
    handle.proxy.forward();
    handle.storeRedis.disconnect();
  });
  afterAll(async () => {
    handle.direct?.disconnect();
    await handle.proxy?.close();
    await handle.server?.dispose();
  });
  return handle;
}

/**
 * Sends a message of a new key (`m-0`, `m-1`, …) with `send`, one after another `gapMs` apart, from 1 s
 * before an {@link OUTAGE_MS} outage of `outage` to 1 s after it; resolves with the keys sent.
 */
export async function trafficThroughOutage(
  outage: StoreBlackhole,
  send: (key: string) => Promise<unknown> | void,
  gapMs: number,
): Promise<string[]> {
  const keys: string[] = [];
  let sending = true;
  const traffic = (async () => {
    while (sending) {
      const key = `m-${keys.length}`;
      keys.push(key);
      await send(key);
      await sleep(gapMs);
    }
  })();
  try {
    await sleep(1_000);
    await outage.blackhole(OUTAGE_MS);
    await sleep(1_000);
  } finally {
    sending = false;
    await traffic;
  }
  return keys;
}

/**
 * A handler that holds every run until {@link HeldHandlers.outageWhileRunning} lets them end: so every
 * slot of a consumer holds a handler when the outage begins, and no claim is made until one ends.
 */
export class HeldHandlers {
  readonly #released: Promise<void>;
  #release!: () => void;

  constructor() {
    this.#released = new Promise<void>((r) => {
      this.#release = r;
    });
  }

  /** The handler: waits for the release. */
  readonly handler = (): Promise<void> => this.#released;

  /**
   * Waits until the handlers of `keys` run, begins the outage of `outage`, lets them end (their
   * completions meet the outage), and ends it {@link OUTAGE_MS} later.
   */
  async outageWhileRunning(outage: StoreBlackhole, keys: readonly string[]): Promise<void> {
    await outage.allRan(keys);
    outage.begin();
    this.#release();
    await sleep(OUTAGE_MS);
    outage.end();
  }
}

/** One run of a consumer's handler: its key, how its claim took the key, when it started. */
export interface HandlerRun {
  readonly key: string;
  readonly outcome: string;
  readonly attempt: number;
  readonly atMs: number;
}

/** What {@link StoreBlackhole.measured} reports of a run through the outage. */
export interface BlackholeMeasures {
  /** Messages the consumer received during the outage whose claim the store did not answer. */
  readonly refused: number;
  /** From the outage's start to the consumer's `storeUnavailable`, in ms. */
  readonly storeUnavailableAfterMs: number;
  /** From the outage's end to the latest first run of a refused message, in ms (0 for none). */
  readonly refusedRunAfterMs: number;
  /** Handler runs `ACQUIRED_STALE` of a key whose handler had not run before. */
  readonly staleWithoutRun: number;
}

/**
 * A consumer's run through a Redis outage that drops packets (the brokers' store-blackhole suites): the
 * store's client reaches Redis through `proxy`; {@link StoreBlackhole.blackhole} drops everything for a
 * while and then delivers what it held. The suite reports its handler runs ({@link StoreBlackhole.ran}),
 * the messages the consumer could not claim ({@link StoreBlackhole.refusedKey}) and its `storeUnavailable`
 * event; {@link StoreBlackhole.expectRecovered} checks what the outage may and may not leave behind.
 */
export class StoreBlackhole {
  readonly runs: HandlerRun[] = [];
  /** Each refused key, with when it was first refused. */
  readonly refused = new Map<string, number>();
  storeUnavailableAtMs: number | undefined;
  outage: { readonly startMs: number; readonly endMs: number } | undefined;
  #startMs: number | undefined;

  constructor(
    readonly proxy: RedisProxy,
    readonly commandTimeoutMs: number,
  ) {}

  /** Records a handler run (from its context). */
  ran(context: {
    readonly key?: string | undefined;
    readonly outcome: string;
    readonly attempt: number;
  }): void {
    this.runs.push({
      key: context.key ?? '',
      outcome: context.outcome,
      attempt: context.attempt,
      atMs: performance.now(),
    });
  }

  /** Records a message whose claim the store did not answer. */
  refusedKey(key: string | undefined): void {
    if (key !== undefined && !this.refused.has(key)) this.refused.set(key, performance.now());
  }

  /** Records the consumer's `storeUnavailable` event (the first one counts). */
  storeUnavailable(): void {
    this.storeUnavailableAtMs ??= performance.now();
  }

  /** Whether packets are being dropped now (between {@link StoreBlackhole.begin} and its end). */
  get dropping(): boolean {
    return this.#startMs !== undefined && this.outage === undefined;
  }

  /** Starts dropping packets; {@link StoreBlackhole.end} delivers what was held. */
  begin(): void {
    this.#startMs = performance.now();
    this.proxy.drop();
  }

  /** Ends the outage begun by {@link StoreBlackhole.begin}: what was held reaches Redis now. */
  end(): void {
    if (this.#startMs === undefined) throw new Error('the outage has not begun');
    this.proxy.forward();
    this.outage = { startMs: this.#startMs, endMs: performance.now() };
  }

  /** Drops packets for `ms`, then delivers what was held. */
  async blackhole(ms: number): Promise<void> {
    this.begin();
    await new Promise((r) => setTimeout(r, ms));
    this.end();
  }

  /** Waits until every key of `keys` ran its handler (within `timeoutMs`). */
  async allRan(keys: readonly string[], timeoutMs = 30_000): Promise<void> {
    await waitFor(
      `${keys.length} handlers to run`,
      () => {
        const ran = new Set(this.runs.map((r) => r.key));
        return keys.every((k) => ran.has(k));
      },
      timeoutMs,
    );
  }

  /** What this run measured (see {@link BlackholeMeasures}). */
  measured(): BlackholeMeasures {
    const outage = this.outage;
    if (outage === undefined || this.storeUnavailableAtMs === undefined) {
      throw new Error('no outage, or no storeUnavailable event');
    }
    const seen = new Set<string>();
    let staleWithoutRun = 0;
    for (const run of this.runs) {
      if (run.outcome === 'ACQUIRED_STALE' && !seen.has(run.key)) staleWithoutRun++;
      seen.add(run.key);
    }
    let refusedRunAfterMs = 0;
    for (const [key, refusedAt] of this.refused) {
      const run = this.runs.find((r) => r.key === key && r.atMs > refusedAt);
      refusedRunAfterMs = Math.max(refusedRunAfterMs, (run?.atMs ?? Number.POSITIVE_INFINITY) - outage.endMs);
    }
    return {
      refused: this.refused.size,
      storeUnavailableAfterMs: this.storeUnavailableAtMs - outage.startMs,
      refusedRunAfterMs,
      staleWithoutRun,
    };
  }

  /**
   * What a Redis outage may leave behind, checked once every key of `keys` ran: `storeUnavailable` within
   * `commandTimeoutMs` + 1 s of the outage's start; each key's first run `ACQUIRED` as attempt 1 (no claim
   * the store did not answer spent an attempt or left the record stale), so no `ACQUIRED_STALE` run of a key
   * whose handler had not run; each refused message run within 2 s of the outage's end (when `refused`:
   * there were some); and every record COMPLETED (`recordOf`), none left IN_PROGRESS.
   */
  async expectRecovered(
    keys: readonly string[],
    recordOf: (key: string) => Promise<IdempotencyRecord | null>,
    { refused }: { refused: boolean },
  ): Promise<BlackholeMeasures> {
    const measured = this.measured();
    expect(measured.storeUnavailableAfterMs).toBeLessThanOrEqual(this.commandTimeoutMs + 1000);
    const first = keys.map((key) => {
      const run = this.runs.find((r) => r.key === key);
      return [key, run?.outcome, run?.attempt];
    });
    expect(first).toEqual(keys.map((key) => [key, 'ACQUIRED', 1]));
    expect(measured.staleWithoutRun).toBe(0);
    if (refused) {
      expect(measured.refused).toBeGreaterThan(0);
      expect(measured.refusedRunAfterMs).toBeLessThanOrEqual(2000);
    }
    await waitFor('every record COMPLETED', async () => {
      const records = await Promise.all(keys.map(recordOf));
      return records.every((r) => r?.state === 'COMPLETED');
    });
    return measured;
  }
}
