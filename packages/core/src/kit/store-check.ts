import { StoreUnavailableError } from '../errors';
import type { IdempotencyStore } from '../store/idempotency-store';
import type { AdapterLog } from './adapter-log';

/** The part of an ioredis client (standalone or Cluster) read here: its events and connection options. */
interface RedisLike {
  on(event: string, listener: (...args: unknown[]) => void): unknown;
  off(event: string, listener: (...args: unknown[]) => void): unknown;
  listenerCount(event: string): number;
  readonly options?: { host?: string; port?: number; path?: string };
  readonly startupNodes?: readonly unknown[];
  /** ioredis' connection status: `connecting`, `connect`, `ready`, `reconnecting`, `end`, … */
  readonly status?: string;
}

/** The longest {@link checkStoreAnswers} waits for a client that is still connecting, in ms. */
const CONNECT_WAIT_MS = 5000;

/**
 * Resolves once a client that is still connecting (`new Redis(url)` a moment ago) is `ready`, has failed
 * to connect (`error`: the ping then says why), {@link CONNECT_WAIT_MS} passed, or `signal` aborted;
 * `undefined` (nothing to wait for, so the ping goes out at once, in the caller's tick) for any other
 * status or an aborted `signal`. Without it, a client made with `enableOfflineQueue: false` answers a ping
 * sent before its connection is up with "Stream isn't writeable", and a healthy consumer would fail to start.
 */
function untilConnected(
  redis: RedisLike | undefined,
  signal: AbortSignal | undefined,
): Promise<void> | undefined {
  if (redis?.status !== 'connecting' && redis?.status !== 'connect') return undefined;
  if (signal?.aborted) return undefined;
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      for (const event of ['ready', 'error', 'end']) redis.off(event, done);
      signal?.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, CONNECT_WAIT_MS);
    for (const event of ['ready', 'error', 'end']) redis.on(event, done);
    signal?.addEventListener('abort', done, { once: true });
  });
}

/** The Redis client of a store that exposes one (`RedisIdempotencyStore.redis`), else `undefined`. */
function redisOf(store: object): RedisLike | undefined {
  let redis: unknown;
  try {
    redis = (store as { redis?: unknown }).redis;
  } catch {
    return undefined;
  }
  if (redis === null || typeof redis !== 'object') return undefined;
  const r = redis as Partial<RedisLike>;
  return typeof r.on === 'function' && typeof r.off === 'function' && typeof r.listenerCount === 'function'
    ? (r as RedisLike)
    : undefined;
}

/**
 * Where the store's Redis is, for error messages: `Redis at host:port` (or its socket path, or the
 * Cluster's startup nodes); `undefined` for a store without a Redis client.
 */
export function describeStoreLocation(store: object): string | undefined {
  const redis = redisOf(store);
  if (!redis) return undefined;
  if (Array.isArray(redis.startupNodes)) {
    const nodes = redis.startupNodes.map((n) =>
      typeof n === 'string' || typeof n === 'number'
        ? String(n)
        : `${(n as { host?: string }).host ?? 'localhost'}:${(n as { port?: number }).port ?? 6379}`,
    );
    return `Redis Cluster at ${nodes.join(', ')}`;
  }
  const o = redis.options;
  if (!o) return undefined;
  return o.path ? `Redis at ${o.path}` : `Redis at ${o.host ?? 'localhost'}:${o.port ?? 6379}`;
}

/**
 * Checks that the store answers one `ping` (bounded by the store's own command timeout: 2 s by default
 * for `RedisIdempotencyStore`), so a consumer started against a wrong URL fails at once instead of
 * pausing on its first message. A client still connecting is given up to 5 s to connect first.
 * @param where - names the consumer in the error, e.g. `the consumer of queue orders`.
 * @param signal - the consumer stops during its start: ends the wait for a connecting client at once,
 *   and once it aborted no ping is sent (the check resolves without one: the caller gives up anyway).
 *   A ping already sent is still awaited (its command timeout bounds it).
 * @throws `StoreUnavailableError` (code `STORE_UNAVAILABLE`) naming the consumer and where the store's
 *   Redis is (host and port), with the ping's error as `cause`.
 */
export async function checkStoreAnswers(
  store: Pick<IdempotencyStore, 'ping'>,
  where: string,
  signal?: AbortSignal,
): Promise<void> {
  try {
    const connecting = untilConnected(redisOf(store), signal);
    if (connecting) await connecting;
    if (signal?.aborted) return;
    await store.ping();
  } catch (error) {
    const location = describeStoreLocation(store);
    const detail = error instanceof Error ? error.message : String(error);
    // Redis answered with a refusal (full, read-only, unable to persist): the URL is right.
    const refused = (error as { cause?: { name?: unknown } } | undefined)?.cause?.name === 'ReplyError';
    const what = refused
      ? `refused to take writes: ${detail}.`
      : `did not answer a ping: ${detail}. Check the Redis URL and that Redis is running.`;
    throw new StoreUnavailableError(
      `${where} cannot start: the idempotency store${location ? ` (${location})` : ''} ${what}`,
      { cause: error },
    );
  }
}

/**
 * The store check of a consumer's start: {@link checkStoreAnswers}, whose failure rejects the start when
 * the runner fails closed (`storeFailureMode: 'closed'`, the default); under `storeFailureMode: 'open'`
 * (the application chose to run unprotected while the store is down) the failure is logged as a warning
 * and the start goes on.
 * @param signal - the consumer stops during its start: see {@link checkStoreAnswers} (no warning then).
 * @throws `StoreUnavailableError` (see {@link checkStoreAnswers}) when the store does not answer and the
 *   runner fails closed.
 */
export async function checkStoreAtStart(
  runner: { readonly store: Pick<IdempotencyStore, 'ping'>; readonly options: { storeFailureMode: string } },
  log: AdapterLog,
  signal?: AbortSignal,
): Promise<void> {
  try {
    await checkStoreAnswers(runner.store, log.where, signal);
  } catch (error) {
    if (runner.options.storeFailureMode !== 'open') throw error;
    if (signal?.aborted) return;
    log.warn(
      `${error instanceof Error ? error.message : String(error)} Starting anyway: storeFailureMode is 'open', so messages run without idempotency until it answers.`,
      { error },
    );
  }
}

/** The one listener this kit attached to a client, and the logs it reports to. */
interface Watch {
  /** One entry per consumer watching (a consumer may share its log with another). */
  readonly logs: Map<symbol, AdapterLog>;
  readonly listener: (error: unknown) => void;
  readonly onReady: () => void;
  down: boolean;
}

const watches = new WeakMap<RedisLike, Watch>();

/**
 * Keeps the store's Redis client from flooding the console: without an `error` listener, ioredis prints
 * `[ioredis] Unhandled error event` with a stack on every reconnect attempt while Redis is down. When the
 * client has no `error` listener (the consumer owns the listening), one listener is attached that logs
 * the first error of each outage at `debug` (one line, with where Redis is), through the first watching
 * consumer whose logger has `debug`, and nothing more until the client is `ready` again. The outage's
 * warning is the runner's (see {@link AdapterLog}). A client the application already listens to is left alone. Several
 * consumers on one client share one listener; it is removed when the last one stops.
 * @returns a function that stops watching for this consumer (call it when the consumer stops).
 */
export function watchRedisErrors(store: object, log: AdapterLog): () => void {
  const redis = redisOf(store);
  if (!redis) return () => {};
  let watch = watches.get(redis);
  if (!watch) {
    if (redis.listenerCount('error') > 0) return () => {}; // the application listens itself
    const location = describeStoreLocation(store);
    const created: Watch = {
      logs: new Map(),
      down: false,
      listener: (error) => {
        if (created.down) return;
        created.down = true;
        // The first consumer whose logger logs `debug` (a consumer with `logger: false` logs nothing).
        const log = [...created.logs.values()].find((l) => l.logger && typeof l.logger.debug === 'function');
        if (!log) return;
        const detail = error instanceof Error ? error.message : String(error);
        log.debug(
          `the Redis client of the idempotency store reports an error (${detail})${location ? ` at ${location}` : ''}; further errors are not logged until it reconnects`,
          { error },
        );
      },
      onReady: () => {
        created.down = false;
      },
    };
    watch = created;
    watches.set(redis, watch);
    redis.on('error', watch.listener);
    redis.on('ready', watch.onReady);
  }
  const current = watch;
  const registration = Symbol('watch');
  current.logs.set(registration, log);
  return () => {
    if (!current.logs.delete(registration) || current.logs.size > 0) return;
    redis.off('error', current.listener);
    redis.off('ready', current.onReady);
    watches.delete(redis);
  };
}
