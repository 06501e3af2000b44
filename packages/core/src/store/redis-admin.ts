import type { Redis } from 'ioredis';
import { InvalidOptionError, UnexpectedReplyError } from '../errors';
import { adminPurgeScript, adminReleaseScript } from '../generated/scripts';
import {
  buildScopeScanPattern,
  checkMaxKeyBytes,
  DEFAULT_KEY_PREFIX,
  parseRecordKey,
  type RecordId,
} from '../keys';
import { connectionForKey, masterConnections } from './cluster-node';
import { decodeState } from './decode-reply';
import type { IdempotencyRecord, RecordState } from './idempotency-store';
import type { RedisClient } from './redis-client';
import { RedisIdempotencyStore, toStoreError } from './redis-store';
import { SCRIPT_NUMBER_OF_KEYS } from './scripts';

/** Options of {@link RedisIdempotencyAdmin}, the same `keyPrefix` and `maxKeyBytes` as the store's. */
export interface RedisIdempotencyAdminOptions {
  /** Prefix of every record key. @defaultValue `'idem'` */
  keyPrefix?: string;
  /** Longest accepted scope or idempotency key, in UTF-8 bytes. An integer >= 1. @defaultValue 512 */
  maxKeyBytes?: number;
  /** The `COUNT` hint of each SCAN call, the keys examined per call and per node. @defaultValue 500 */
  scanCount?: number;
}

/** Reply of {@link RedisIdempotencyAdmin.release}, from lua/admin-release.lua. */
export type AdminReleaseReply =
  | {
      readonly outcome: 'OK';
      readonly previousState: RecordState;
      readonly fencingToken: number;
      readonly serverTimeMs: number;
    }
  | { readonly outcome: 'NOT_FOUND' }
  | { readonly outcome: 'NOT_RELEASABLE'; readonly state: RecordState; readonly fencingToken: number }
  | { readonly outcome: 'TOKEN_CHANGED'; readonly state: RecordState; readonly fencingToken: number };

/** Reply of {@link RedisIdempotencyAdmin.purge}, from lua/admin-purge.lua. */
export type AdminPurgeReply =
  | { readonly outcome: 'DELETED'; readonly state: RecordState }
  | { readonly outcome: 'NOT_FOUND' }
  | { readonly outcome: 'NOT_A_RECORD'; readonly type: string }
  | { readonly outcome: 'LEASE_HELD'; readonly fencingToken: number; readonly remainingLeaseMs: number }
  | { readonly outcome: 'OTHER_STATE'; readonly state: RecordState };

const STATE_LETTERS: Record<RecordState, string> = {
  IN_PROGRESS: 'P',
  COMPLETED: 'C',
  RELEASED: 'R',
  FAILED: 'F',
};

const ADMIN_SCRIPTS = { release: adminReleaseScript, purge: adminPurgeScript } as const;

/**
 * Operators' access to the records of a {@link RedisIdempotencyStore}, standalone or Cluster, for the
 * `idempotent-consumer` CLI. It finds the records of a scope with SCAN on every master, never KEYS, reads one
 * with the store's `get`, makes a stuck one claimable again and deletes finished ones. Each change is one Lua
 * script on one key, lua/admin-release.lua or lua/admin-purge.lua, never a blind DEL.
 *
 * @throws {@link InvalidOptionError} from the constructor when `redis` is missing or an option is out of
 *   range.
 */
export class RedisIdempotencyAdmin {
  /** The store the records are read with, through `get`. */
  readonly store: RedisIdempotencyStore;
  readonly #redis: RedisClient;
  readonly #prefix: string;
  readonly #maxKeyBytes: number;
  readonly #scanCount: number;
  readonly #commands: Record<keyof typeof ADMIN_SCRIPTS, string>;

  constructor(dependencies: { redis: RedisClient }, options: RedisIdempotencyAdminOptions = {}) {
    if (!dependencies?.redis) throw new InvalidOptionError('RedisIdempotencyAdmin needs { redis }');
    this.#redis = dependencies.redis;
    this.#prefix = options.keyPrefix ?? DEFAULT_KEY_PREFIX;
    this.#maxKeyBytes = checkMaxKeyBytes(options.maxKeyBytes);
    this.#scanCount = options.scanCount ?? 500;
    if (!Number.isSafeInteger(this.#scanCount) || this.#scanCount <= 0) {
      throw new InvalidOptionError(`scanCount must be a positive integer, got ${options.scanCount}`);
    }
    this.store = new RedisIdempotencyStore(
      { redis: this.#redis },
      { keyPrefix: this.#prefix, maxKeyBytes: this.#maxKeyBytes },
    );
    const names = {} as Record<keyof typeof ADMIN_SCRIPTS, string>;
    for (const [name, script] of Object.entries(ADMIN_SCRIPTS) as [
      keyof typeof ADMIN_SCRIPTS,
      typeof adminReleaseScript,
    ][]) {
      names[name] = `idem_${script.name}_${script.sha1.slice(0, 8)}`;
      this.#redis.defineCommand(names[name], { numberOfKeys: SCRIPT_NUMBER_OF_KEYS, lua: script.lua });
    }
    this.#commands = names;
  }

  /**
   * The ids of every record of `scope`, in batches as SCAN returns them, a Cluster's masters one after
   * another. SCAN may return a key twice, and each id is yielded once, so the ids seen are kept in memory.
   * Records written during the scan may or may not be included.
   * @throws {@link InvalidKeyError} for a bad scope, and `StoreUnavailableError` when Redis does not answer.
   */
  async *scan(scope: string): AsyncGenerator<RecordId[]> {
    const match = buildScopeScanPattern(this.#prefix, scope, this.#maxKeyBytes);
    const nodes = masterConnections(this.#redis);
    const seen = new Set<string>();
    for (const node of nodes) {
      let cursor = '0';
      do {
        let keys: string[];
        try {
          [cursor, keys] = await node.scan(cursor, 'MATCH', match, 'COUNT', this.#scanCount);
        } catch (error) {
          throw toStoreError(error);
        }
        const ids: RecordId[] = [];
        for (const key of keys) {
          const id = seen.has(key) ? undefined : parseRecordKey(this.#prefix, scope, key, this.#maxKeyBytes);
          seen.add(key);
          if (id) ids.push(id);
        }
        if (ids.length > 0) yield ids;
      } while (cursor !== '0');
    }
  }

  /** One record, decoded by `RedisIdempotencyStore.get`, or `null` when there is none. */
  get(id: RecordId): Promise<IdempotencyRecord | null> {
    return this.store.get(id);
  }

  /**
   * The Redis server clock in ms since the epoch, from `TIME`. On a Cluster it is the clock of the node that
   * owns the record's slot when `id` is given. Lease expiries can then be shown as time remaining on the
   * clock they run on.
   */
  async serverTimeMs(id?: RecordId): Promise<number> {
    try {
      const node = (id && connectionForKey(this.#redis, this.store.recordKey(id))) || (this.#redis as Redis);
      const [seconds, micros] = await node.time();
      return Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
    } catch (error) {
      throw toStoreError(error);
    }
  }

  /**
   * Makes an IN_PROGRESS or FAILED record claimable again with lua/admin-release.lua. The record becomes
   * RELEASED, keeps its token, and its attempts go back to 0. With `expectedFencingToken`, nothing changes
   * when the record's token differs, because it was claimed since the operator looked at it. With
   * `expectedState`, nothing changes when its state differs, because it was written since by a holder's fail
   * or a claim exhausting `maxAttempts`, which keep the token. Both answer `TOKEN_CHANGED`. The next claim is
   * `ACQUIRED_STALE` when the record's last handler may be partial or still running, else `ACQUIRED`. That is
   * an IN_PROGRESS record with a started handler, or a FAILED one whose last lease lapsed or whose handler
   * was abandoned by `handlerTimeoutMs`, as `IdempotencyRecord.abandoned` says.
   * @param options.retentionMs - TTL of the released record in ms, after which it is forgotten.
   * @param options.expectedState - the state the operator saw, IN_PROGRESS or FAILED. Absent means any.
   */
  async release(
    id: RecordId,
    options: {
      retentionMs: number;
      expectedFencingToken?: number;
      expectedState?: Extract<RecordState, 'IN_PROGRESS' | 'FAILED'>;
    },
  ): Promise<AdminReleaseReply> {
    const expected = options.expectedFencingToken ?? 0;
    if (!Number.isSafeInteger(expected) || expected < 0) {
      throw new InvalidOptionError(`expectedFencingToken must be an integer >= 0, got ${expected}`);
    }
    const expectedState = options.expectedState;
    if (expectedState !== undefined && expectedState !== 'IN_PROGRESS' && expectedState !== 'FAILED') {
      throw new InvalidOptionError(
        `expectedState must be IN_PROGRESS or FAILED, got ${JSON.stringify(expectedState)}`,
      );
    }
    if (!Number.isSafeInteger(options.retentionMs) || options.retentionMs <= 0) {
      throw new InvalidOptionError(
        `retentionMs must be a positive integer (milliseconds), got ${options.retentionMs}`,
      );
    }
    const stateLetter = expectedState === undefined ? '' : STATE_LETTERS[expectedState];
    const reply = await this.#call('release', id, [expected, options.retentionMs, stateLetter]);
    const [head, a, b, c] = reply;
    switch (head) {
      case 'OK':
        return {
          outcome: 'OK',
          previousState: decodeState(a),
          fencingToken: num(reply, b),
          serverTimeMs: num(reply, c),
        };
      case 'NOT_FOUND':
        return { outcome: 'NOT_FOUND' };
      case 'NOT_RELEASABLE':
        return { outcome: 'NOT_RELEASABLE', state: decodeState(a), fencingToken: num(reply, b) };
      case 'TOKEN_CHANGED':
        return { outcome: 'TOKEN_CHANGED', fencingToken: num(reply, a), state: decodeState(b) };
      default:
        return unexpected('admin-release', reply);
    }
  }

  /**
   * Deletes one record with lua/admin-purge.lua unless a worker holds its lease, which answers `LEASE_HELD`.
   * A key that is not an idempotency record answers `NOT_A_RECORD`. When `options.states` is given and the
   * record is in none of them it answers `OTHER_STATE`, checked in the same script, so a record that changed
   * state since it was listed is never deleted. The key's next message runs again.
   */
  async purge(id: RecordId, options: { states?: readonly RecordState[] } = {}): Promise<AdminPurgeReply> {
    const states = (options.states ?? []).map((s) => STATE_LETTERS[s] ?? invalidState(s)).join('');
    const reply = await this.#call('purge', id, [states]);
    const [head, a, b] = reply;
    switch (head) {
      case 'DELETED':
        return { outcome: 'DELETED', state: decodeState(a) };
      case 'NOT_FOUND':
        return { outcome: 'NOT_FOUND' };
      case 'NOT_A_RECORD':
        return { outcome: 'NOT_A_RECORD', type: String(a) };
      case 'LEASE_HELD':
        return { outcome: 'LEASE_HELD', fencingToken: num(reply, a), remainingLeaseMs: num(reply, b) };
      case 'OTHER_STATE':
        return { outcome: 'OTHER_STATE', state: decodeState(a) };
      default:
        return unexpected('admin-purge', reply);
    }
  }

  async #call(
    script: keyof typeof ADMIN_SCRIPTS,
    id: RecordId,
    args: (string | number)[],
  ): Promise<unknown[]> {
    const key = this.store.recordKey(id);
    const fn = (this.#redis as unknown as Record<string, (...a: unknown[]) => Promise<unknown>>)[
      this.#commands[script]
    ]!;
    let reply: unknown;
    try {
      reply = await fn.call(this.#redis, key, ...args);
    } catch (error) {
      throw toStoreError(error);
    }
    return Array.isArray(reply) ? reply : unexpected(`admin-${script}`, reply);
  }
}

function invalidState(state: string): never {
  throw new InvalidOptionError(`Unknown record state ${JSON.stringify(state)}`);
}

function num(reply: unknown, value: unknown): number {
  const n = typeof value === 'number' ? value : typeof value === 'string' ? Number(value) : Number.NaN;
  return Number.isSafeInteger(n) ? n : unexpected('admin', reply);
}

function unexpected(script: string, reply: unknown): never {
  throw new UnexpectedReplyError(
    `Unexpected reply from the ${script} script: ${String(JSON.stringify(reply)).slice(0, 200)}`,
  );
}
