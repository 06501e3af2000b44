import {
  InvalidOptionError,
  isIdempotencyError,
  StoreUnavailableError,
  UnexpectedReplyError,
} from '../errors';
import { buildRecordKey, DEFAULT_MAX_KEY_BYTES, type RecordId } from '../keys';
import { decodeClaimReply, decodeExtendReply, decodeState, decodeWriteReply } from './decode-reply';
import type {
  ClaimOptions,
  ClaimReply,
  ClaimRequest,
  ExtendReply,
  IdempotencyRecord,
  IdempotencyStore,
  WriteReply,
} from './idempotency-store';
import type { RedisClient } from './redis-client';
import { defineScripts, type ScriptName, scriptArgs } from './scripts';

/** Options of {@link RedisIdempotencyStore}. */
export interface RedisIdempotencyStoreOptions {
  /**
   * Prefix of every record key, so that several applications can share one Redis.
   * @defaultValue `'idem'`
   */
  keyPrefix?: string;
  /**
   * Longest accepted scope or idempotency key, in UTF-8 bytes.
   * @defaultValue 512
   */
  maxKeyBytes?: number;
  /**
   * How long one store call may take before it rejects with `StoreUnavailableError`, in milliseconds.
   * A claim that timed out may still be applied later by Redis; the record is then IN_PROGRESS under a
   * lease nobody holds, which the next claim after the lease sees as ACQUIRED_STALE: never a double run.
   * @defaultValue 2000
   */
  commandTimeoutMs?: number;
}

/** Reply errors that mean the server cannot serve now (a failover, loading, cluster reconfiguring). */
const TRANSIENT_REPLY = /^(LOADING|CLUSTERDOWN|TRYAGAIN|MASTERDOWN|READONLY|BUSY|MOVED|ASK|NOREPLICAS)\b/;

/**
 * {@link IdempotencyStore} on Redis through ioredis, standalone or Cluster. Each operation is one Lua
 * script on one key (Cluster safe without hash tags), registered with `defineCommand` under a name that
 * carries the script's SHA-1, so it runs with EVALSHA and falls back to EVAL on NOSCRIPT (ioredis
 * `lib/Script.ts`). Scripts never run inside MULTI. Pass a client with `enableAutoPipelining: true` to make
 * concurrent calls share round trips.
 *
 * @example
 * ```ts
 * const store = new RedisIdempotencyStore({ redis: new Redis(process.env.REDIS_URL) }, { keyPrefix: 'payments' });
 * ```
 * @throws {@link InvalidOptionError} from the constructor when an option is out of range.
 */
export class RedisIdempotencyStore implements IdempotencyStore {
  readonly #redis: RedisClient;
  readonly #prefix: string;
  readonly #maxKeyBytes: number;
  readonly #timeoutMs: number;
  readonly #commands: Record<ScriptName, string>;

  constructor(dependencies: { redis: RedisClient }, options: RedisIdempotencyStoreOptions = {}) {
    if (!dependencies?.redis) throw new InvalidOptionError('RedisIdempotencyStore needs { redis }');
    this.#redis = dependencies.redis;
    this.#prefix = options.keyPrefix ?? 'idem';
    this.#maxKeyBytes = options.maxKeyBytes ?? DEFAULT_MAX_KEY_BYTES;
    this.#timeoutMs = options.commandTimeoutMs ?? 2000;
    if (!(this.#timeoutMs > 0)) throw new InvalidOptionError('commandTimeoutMs must be > 0');
    if (!(this.#maxKeyBytes > 0)) throw new InvalidOptionError('maxKeyBytes must be > 0');
    buildRecordKey(this.#prefix, { scope: 's', key: 'k' }); // validates the prefix
    this.#commands = defineScripts(this.#redis);
  }

  /** The Redis key of a record (for inspection and tests); see `buildRecordKey`. */
  recordKey(id: RecordId): string {
    return buildRecordKey(this.#prefix, id, this.#maxKeyBytes);
  }

  async claim(id: RecordId, options: ClaimOptions): Promise<ClaimReply> {
    const args = scriptArgs.claim(options);
    return decodeClaimReply(await this.#call('claim', this.recordKey(id), args));
  }

  async claimMany(requests: readonly ClaimRequest[]): Promise<ClaimReply[]> {
    if (requests.length === 0) return [];
    const calls = requests.map((r) => ({ key: this.recordKey(r.id), args: scriptArgs.claim(r.options) }));
    if (this.#redis.isCluster) {
      // A Cluster pipeline must stay within one slot; concurrent calls are batched per node instead by
      // auto-pipelining, when the client enables it.
      return Promise.all(calls.map(async (c) => decodeClaimReply(await this.#call('claim', c.key, c.args))));
    }
    const pipeline = this.#redis.pipeline();
    const method = this.#commands.claim;
    for (const c of calls) (pipeline as unknown as Record<string, ScriptFn>)[method]!(c.key, ...c.args);
    const results = await this.#guard(pipeline.exec());
    if (!results || results.length !== calls.length) {
      throw new UnexpectedReplyError(
        `The claim pipeline returned ${results?.length} replies for ${calls.length}`,
      );
    }
    return results.map(([err, reply]) => {
      if (err) throw toStoreError(err);
      return decodeClaimReply(reply);
    });
  }

  async complete(
    id: RecordId,
    fencingToken: number,
    options: { retentionMs: number; result?: string },
  ): Promise<WriteReply> {
    const args = scriptArgs.complete(fencingToken, options.retentionMs, options.result);
    return decodeWriteReply('complete', await this.#call('complete', this.recordKey(id), args));
  }

  async release(id: RecordId, fencingToken: number, options: { retentionMs: number }): Promise<WriteReply> {
    const args = scriptArgs.release(fencingToken, options.retentionMs);
    return decodeWriteReply('release', await this.#call('release', this.recordKey(id), args));
  }

  async fail(
    id: RecordId,
    fencingToken: number,
    options: { retentionMs: number; error: string },
  ): Promise<WriteReply> {
    const args = scriptArgs.fail(fencingToken, options.retentionMs, options.error);
    return decodeWriteReply('fail', await this.#call('fail', this.recordKey(id), args));
  }

  async extend(
    id: RecordId,
    fencingToken: number,
    options: { leaseMs: number; retentionMs: number },
  ): Promise<ExtendReply> {
    const args = scriptArgs.extend(fencingToken, options.leaseMs, options.retentionMs);
    return decodeExtendReply(await this.#call('extend', this.recordKey(id), args));
  }

  async get(id: RecordId): Promise<IdempotencyRecord | null> {
    const key = this.recordKey(id);
    const [fields, ttlMs] = await this.#guard(Promise.all([this.#redis.hgetall(key), this.#redis.pttl(key)]));
    if (!fields?.s) return null;
    const num = (v: string | undefined) => (v === undefined || v === '' ? undefined : Number(v));
    return {
      state: decodeState(fields.s),
      fencingToken: num(fields.t) ?? 0,
      attempt: num(fields.a) ?? 0,
      fingerprint: fields.f ?? '',
      leaseExpiresAtMs: fields.s === 'P' ? num(fields.e) : undefined,
      result: fields.s === 'C' && fields.h === '1' ? fields.r : undefined,
      error: fields.s === 'F' ? fields.x : undefined,
      createdAtMs: num(fields.c) ?? 0,
      updatedAtMs: num(fields.u) ?? 0,
      ttlMs,
    };
  }

  async ping(): Promise<void> {
    await this.#guard(this.#redis.ping());
  }

  /** Runs one script on one key (the only key it touches), mapping failures to typed errors. */
  #call(script: ScriptName, key: string, args: (string | number)[]): Promise<unknown> {
    const fn = (this.#redis as unknown as Record<string, ScriptFn>)[this.#commands[script]]!;
    return this.#guard(fn.call(this.#redis, key, ...args));
  }

  /** Bounds a call by `commandTimeoutMs` and maps every failure to a typed error. */
  #guard<T>(promise: Promise<T>): Promise<T> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () => reject(new StoreUnavailableError(`Redis did not answer within ${this.#timeoutMs} ms`)),
        this.#timeoutMs,
      );
      timer.unref?.();
    });
    return Promise.race([promise, timeout]).then(
      (value) => {
        clearTimeout(timer);
        return value;
      },
      (err: unknown) => {
        clearTimeout(timer);
        throw toStoreError(err);
      },
    );
  }
}

type ScriptFn = (key: string, ...args: (string | number)[]) => Promise<unknown>;

/** Maps an ioredis failure to `StoreUnavailableError` (transient) or `UnexpectedReplyError` (a bug). */
function toStoreError(err: unknown): Error {
  if (isIdempotencyError(err)) return err;
  const e = err as { name?: string; message?: string };
  if (e?.name === 'ReplyError' && !TRANSIENT_REPLY.test(e.message ?? '')) {
    return new UnexpectedReplyError(`Redis refused a script call: ${e.message}`, { cause: err });
  }
  return new StoreUnavailableError(`Redis is unavailable: ${e?.message ?? String(err)}`, { cause: err });
}
