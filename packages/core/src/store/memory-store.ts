import { buildRecordKey, checkMaxKeyBytes, type RecordId } from '../keys';
import type {
  ClaimOptions,
  ClaimReply,
  ClaimRequest,
  ExtendReply,
  FailOptions,
  IdempotencyRecord,
  IdempotencyStore,
  LeaseLostReply,
  MarkDeadLetteredReply,
  OutcomeWaitOptions,
  RecordState,
  ReleaseOptions,
  StartReply,
  WriteReply,
} from './idempotency-store';
import { waitForOutcome } from './outcome-wait';
import { scriptArgs } from './scripts';

/** Options of {@link MemoryIdempotencyStore}. */
export interface MemoryIdempotencyStoreOptions {
  /**
   * The clock that leases and retention are measured on, in ms since the epoch. Inject a fake clock to
   * test lease expiry without waiting.
   * @defaultValue `Date.now`
   */
  now?: () => number;
  /**
   * Longest accepted scope or idempotency key, in UTF-8 bytes. An integer >= 1, as in
   * `RedisIdempotencyStore`, else the constructor throws `InvalidOptionError`.
   * @defaultValue 512
   */
  maxKeyBytes?: number;
}

/**
 * The prefix of the memory store's record keys, the keys of its map. It is one byte, so that any
 * `maxKeyBytes` bounds only the scope and the key the caller gives, since `buildRecordKey` checks the prefix
 * against it too.
 */
const KEY_PREFIX = 'm';

interface MutableRecord {
  state: RecordState;
  fencingToken: number;
  attempt: number;
  fingerprint: string;
  leaseExpiresAtMs: number | undefined;
  hasResult: boolean;
  result: string;
  error: string;
  /** Claimed with `reserve` and the handler not started, so no attempt counted yet. */
  reserved: boolean;
  /** FAILED only because the last attempt's lease lapsed. Its holder may still complete. */
  lapsed: boolean;
  deadLettered: boolean;
  /**
   * The next claim is stale, field `b` of lua/claim.lua. Set when a holder released a handler it abandoned
   * that may still run, when a claim reserved the key from a lapsed handler, or when a claim was given back
   * unrun after `ACQUIRED_STALE`. Cleared when a handler starts.
   */
  abandoned: boolean;
  createdAtMs: number;
  updatedAtMs: number;
  /** When the record is forgotten, as the Redis key TTL. */
  expiresAtMs: number;
}

/**
 * {@link IdempotencyStore} in one process's memory, with the same semantics as the Lua scripts, since the
 * contract tests run against both. For single-process consumers, local development and fast unit tests. It
 * protects nothing across processes. Arguments are checked exactly as the Redis store checks them. Every
 * call is answered, so a claim's nonce and `lua/give-back.lua`, for claims whose reply never came, have
 * no counterpart here.
 */
export class MemoryIdempotencyStore implements IdempotencyStore {
  readonly #records = new Map<string, MutableRecord>();
  readonly #now: () => number;
  readonly #maxKeyBytes: number;
  #lastToken = 0;
  /** Waiters per record key, see {@link MemoryIdempotencyStore.waitForOutcome}. */
  readonly #waiters = new Map<string, Set<() => void>>();

  /** @throws `InvalidOptionError` when `maxKeyBytes` is not an integer >= 1. */
  constructor(options: MemoryIdempotencyStoreOptions = {}) {
    this.#now = options.now ?? Date.now;
    this.#maxKeyBytes = checkMaxKeyBytes(options.maxKeyBytes);
  }

  /** Number of records held, after dropping the expired ones. */
  get size(): number {
    const now = this.#now();
    for (const [key, rec] of this.#records) if (rec.expiresAtMs <= now) this.#records.delete(key);
    return this.#records.size;
  }

  async claim(id: RecordId, options: ClaimOptions): Promise<ClaimReply> {
    return this.#claim(id, options);
  }

  async claimMany(requests: readonly ClaimRequest[]): Promise<ClaimReply[]> {
    // Like the Redis store, check every request before claiming any, so a bad one changes nothing.
    for (const r of requests) {
      buildRecordKey(KEY_PREFIX, r.id, this.#maxKeyBytes);
      scriptArgs.claim(r.options);
    }
    return requests.map((r) => this.#claim(r.id, r.options));
  }

  #claim(id: RecordId, options: ClaimOptions): ClaimReply {
    const key = buildRecordKey(KEY_PREFIX, id, this.#maxKeyBytes);
    const [leaseMs, retentionMs, fingerprint, maxAttempts, reserve] = scriptArgs.claim(options) as [
      number,
      number,
      string,
      number,
      string,
    ];
    const now = this.#now();
    const rec = this.#read(key, now);
    if (rec && fingerprint !== '' && rec.fingerprint !== '' && rec.fingerprint !== fingerprint) {
      return {
        outcome: 'PAYLOAD_MISMATCH',
        fencingToken: rec.fencingToken,
        attempt: rec.attempt,
        state: rec.state,
      };
    }
    if (rec?.state === 'COMPLETED') {
      return {
        outcome: 'DUPLICATE',
        fencingToken: rec.fencingToken,
        attempt: rec.attempt,
        result: rec.hasResult ? rec.result : undefined,
        completedAtMs: rec.updatedAtMs,
      };
    }
    if (rec?.state === 'FAILED') {
      return {
        outcome: 'FAILED',
        fencingToken: rec.fencingToken,
        attempt: rec.attempt,
        error: rec.error,
        deadLettered: rec.deadLettered,
      };
    }
    let outcome: 'ACQUIRED' | 'ACQUIRED_STALE' = 'ACQUIRED';
    const ranBefore = rec?.state === 'IN_PROGRESS' && !rec.reserved;
    const abandoned = rec?.abandoned === true;
    if (abandoned) outcome = 'ACQUIRED_STALE';
    if (rec?.state === 'IN_PROGRESS') {
      const expiresAt = rec.leaseExpiresAtMs ?? 0;
      if (expiresAt > now) {
        return {
          outcome: 'CONFLICT',
          fencingToken: rec.fencingToken,
          attempt: rec.attempt,
          remainingLeaseMs: expiresAt - now,
        };
      }
      if (ranBefore) outcome = 'ACQUIRED_STALE';
    }
    if (rec && maxAttempts > 0 && rec.attempt >= maxAttempts) {
      let error = `ATTEMPTS_EXHAUSTED: ${rec.attempt} of ${maxAttempts} attempts used`;
      if (ranBefore) error += ', the last one lost its lease';
      // Like lua/claim.lua, `abandoned` does not say whether that handler timed out or lapsed.
      else if (abandoned) {
        error += ', the last one recorded no outcome (abandoned by its handler timeout, or its lease lapsed)';
      }
      Object.assign(rec, {
        state: 'FAILED',
        error,
        updatedAtMs: now,
        leaseExpiresAtMs: undefined,
        reserved: false,
        // Like lua/claim.lua, a record FAILED by maxAttempts keeps saying that its last handler may be
        // partial, for an operator's release by lua/admin-release.lua.
        lapsed: ranBefore,
      });
      rec.expiresAtMs = now + retentionMs;
      return {
        outcome: 'FAILED',
        fencingToken: rec.fencingToken,
        attempt: rec.attempt,
        error,
        deadLettered: false,
      };
    }
    const next: MutableRecord = rec ?? {
      state: 'IN_PROGRESS',
      fencingToken: 0,
      attempt: 0,
      fingerprint,
      leaseExpiresAtMs: undefined,
      hasResult: false,
      result: '',
      error: '',
      reserved: false,
      lapsed: false,
      deadLettered: false,
      abandoned: false,
      createdAtMs: now,
      updatedAtMs: now,
      expiresAtMs: 0,
    };
    // The same rule as lua/claim.lua. The token is greater than the record's and than the clock in µs, and,
    // within this store, than any token it issued, so a record it forgot cannot bring a token back.
    next.fencingToken = Math.max(next.fencingToken + 1, now * 1000, this.#lastToken + 1);
    this.#lastToken = next.fencingToken;
    next.state = 'IN_PROGRESS';
    next.reserved = reserve === '1';
    if (!next.reserved) {
      next.attempt += 1;
      next.abandoned = false;
    } else if (ranBefore) {
      // Like lua/claim.lua, a reservation taken over from a lapsed handler keeps saying so until one starts.
      next.abandoned = true;
    }
    next.leaseExpiresAtMs = now + leaseMs;
    next.updatedAtMs = now;
    next.expiresAtMs = now + leaseMs + retentionMs;
    if (next.fingerprint === '' && fingerprint !== '') next.fingerprint = fingerprint;
    this.#records.set(key, next);
    return {
      outcome,
      fencingToken: next.fencingToken,
      attempt: next.reserved ? next.attempt + 1 : next.attempt,
      leaseExpiresAtMs: next.leaseExpiresAtMs,
      serverTimeMs: now,
      started: !next.reserved,
    };
  }

  async complete(
    id: RecordId,
    fencingToken: number,
    options: { retentionMs: number; result?: string },
  ): Promise<WriteReply> {
    scriptArgs.complete(fencingToken, options.retentionMs, options.result);
    return this.#write(id, fencingToken, { lapsedFailure: true }, (rec, now) => {
      rec.state = 'COMPLETED';
      rec.lapsed = false;
      rec.abandoned = false;
      rec.deadLettered = false; // like complete.lua's HDEL d
      rec.createdAtMs = 0; // complete.lua drops c, so a completed record keeps its completion time only
      rec.error = '';
      rec.hasResult = options.result !== undefined;
      rec.result = options.result ?? '';
      rec.expiresAtMs = now + options.retentionMs;
    });
  }

  async release(id: RecordId, fencingToken: number, options: ReleaseOptions): Promise<WriteReply> {
    scriptArgs.release(fencingToken, options.retentionMs, options.abandoned, options.neverStarted);
    return this.#write(id, fencingToken, {}, (rec, now) => {
      rec.state = 'RELEASED';
      if (options.abandoned === true) rec.abandoned = true;
      // Like lua/release.lua, a counted claim whose handler never ran gives its attempt back.
      if (options.neverStarted === true && !rec.reserved && rec.attempt > 0) rec.attempt -= 1;
      rec.expiresAtMs = now + options.retentionMs;
    });
  }

  async fail(id: RecordId, fencingToken: number, options: FailOptions): Promise<WriteReply> {
    scriptArgs.fail(fencingToken, options.retentionMs, options.error, options.abandoned);
    return this.#write(id, fencingToken, {}, (rec, now) => {
      rec.state = 'FAILED';
      rec.error = String(options.error);
      // Like lua/fail.lua, a handler given up on after handlerTimeoutMs may still run, and the record says
      // so.
      if (options.abandoned === true) rec.abandoned = true;
      rec.expiresAtMs = now + options.retentionMs;
    });
  }

  async extend(
    id: RecordId,
    fencingToken: number,
    options: { leaseMs: number; retentionMs: number },
  ): Promise<ExtendReply> {
    scriptArgs.extend(fencingToken, options.leaseMs, options.retentionMs);
    const now = this.#now();
    const rec = this.#fenced(id, fencingToken, now, {});
    if (!rec.ok) return rec;
    const held = rec.record;
    held.leaseExpiresAtMs = now + options.leaseMs;
    held.updatedAtMs = now;
    held.expiresAtMs = now + options.leaseMs + options.retentionMs;
    return { ok: true, leaseExpiresAtMs: held.leaseExpiresAtMs, serverTimeMs: now };
  }

  async start(
    id: RecordId,
    fencingToken: number,
    options: { leaseMs: number; retentionMs: number },
  ): Promise<StartReply> {
    scriptArgs.start(fencingToken, options.leaseMs, options.retentionMs);
    const now = this.#now();
    const rec = this.#fenced(id, fencingToken, now, {});
    if (!rec.ok) return rec;
    const held = rec.record;
    if (held.reserved) {
      held.reserved = false;
      held.attempt += 1;
    }
    held.abandoned = false;
    held.leaseExpiresAtMs = now + options.leaseMs;
    held.updatedAtMs = now;
    held.expiresAtMs = now + options.leaseMs + options.retentionMs;
    return { ok: true, attempt: held.attempt, leaseExpiresAtMs: held.leaseExpiresAtMs, serverTimeMs: now };
  }

  async markDeadLettered(id: RecordId, fencingToken: number): Promise<MarkDeadLetteredReply> {
    scriptArgs.markDeadLettered(fencingToken);
    const rec = this.#fenced(id, fencingToken, this.#now(), { state: 'FAILED' });
    if (!rec.ok) return rec;
    const first = !rec.record.deadLettered;
    rec.record.deadLettered = true;
    return { ok: true, first };
  }

  async waitForOutcome(id: RecordId, options: ClaimOptions, wait: OutcomeWaitOptions): Promise<ClaimReply> {
    const key = buildRecordKey(KEY_PREFIX, id, this.#maxKeyBytes);
    scriptArgs.claim(options);
    return waitForOutcome(
      () => this.claim(id, options),
      async (wake) => {
        const set = this.#waiters.get(key) ?? new Set();
        this.#waiters.set(key, set.add(wake));
        return () => {
          set.delete(wake);
          if (set.size === 0) this.#waiters.delete(key);
        };
      },
      wait,
    );
  }

  async get(id: RecordId): Promise<IdempotencyRecord | null> {
    const now = this.#now();
    const rec = this.#read(buildRecordKey(KEY_PREFIX, id, this.#maxKeyBytes), now);
    if (!rec) return null;
    return {
      state: rec.state,
      fencingToken: rec.fencingToken,
      attempt: rec.attempt,
      fingerprint: rec.fingerprint,
      leaseExpiresAtMs: rec.state === 'IN_PROGRESS' ? rec.leaseExpiresAtMs : undefined,
      result: rec.state === 'COMPLETED' && rec.hasResult ? rec.result : undefined,
      error: rec.state === 'FAILED' ? rec.error : undefined,
      reserved: rec.state === 'IN_PROGRESS' && rec.reserved,
      deadLettered: rec.state === 'FAILED' && rec.deadLettered,
      lapsed: rec.state === 'FAILED' && rec.lapsed,
      abandoned: rec.abandoned,
      createdAtMs: rec.createdAtMs,
      updatedAtMs: rec.updatedAtMs,
      ttlMs: rec.expiresAtMs - now,
    };
  }

  async ping(): Promise<void> {}

  #read(key: string, now: number): MutableRecord | undefined {
    const rec = this.#records.get(key);
    if (rec && rec.expiresAtMs <= now) {
      this.#records.delete(key);
      return undefined;
    }
    return rec;
  }

  /**
   * The fence of lua/includes/fence.lua. The record must carry this token in `state`, IN_PROGRESS by default,
   * or be FAILED only because its lease lapsed when `lapsedFailure` allows that.
   */
  #fenced(
    id: RecordId,
    fencingToken: number,
    now: number,
    allow: { state?: RecordState; lapsedFailure?: boolean },
  ): { ok: true; record: MutableRecord } | LeaseLostReply {
    const rec = this.#read(buildRecordKey(KEY_PREFIX, id, this.#maxKeyBytes), now);
    const held =
      rec?.fencingToken === fencingToken &&
      (rec.state === (allow.state ?? 'IN_PROGRESS') ||
        (allow.lapsedFailure === true && rec.state === 'FAILED' && rec.lapsed));
    return held ? { ok: true, record: rec } : leaseLost(rec);
  }

  #write(
    id: RecordId,
    fencingToken: number,
    allow: { lapsedFailure?: boolean },
    apply: (rec: MutableRecord, now: number) => void,
  ): WriteReply {
    const now = this.#now();
    const rec = this.#fenced(id, fencingToken, now, allow);
    if (!rec.ok) return rec;
    apply(rec.record, now);
    rec.record.updatedAtMs = now;
    rec.record.leaseExpiresAtMs = undefined;
    rec.record.reserved = false;
    // Like lua/includes/notify.lua, wake the waiters once this write has returned.
    const key = buildRecordKey(KEY_PREFIX, id, this.#maxKeyBytes);
    for (const wake of this.#waiters.get(key) ?? []) queueMicrotask(wake);
    return { ok: true, serverTimeMs: now };
  }
}

function leaseLost(rec: MutableRecord | undefined): LeaseLostReply {
  return {
    ok: false,
    reason: 'LEASE_LOST',
    currentFencingToken: rec?.fencingToken ?? 0,
    state: rec?.state ?? null,
  };
}
