import { buildRecordKey, DEFAULT_MAX_KEY_BYTES, type RecordId } from '../keys';
import type {
  ClaimOptions,
  ClaimReply,
  ClaimRequest,
  ExtendReply,
  IdempotencyRecord,
  IdempotencyStore,
  LeaseLostReply,
  RecordState,
  WriteReply,
} from './idempotency-store';
import { scriptArgs } from './scripts';

/** Options of {@link MemoryIdempotencyStore}. */
export interface MemoryIdempotencyStoreOptions {
  /**
   * The clock that leases and retention are measured on, in ms since the epoch. Inject a fake clock to
   * test lease expiry without waiting.
   * @defaultValue `Date.now`
   */
  now?: () => number;
  /** Longest accepted scope or idempotency key, in UTF-8 bytes. @defaultValue 512 */
  maxKeyBytes?: number;
}

interface MutableRecord {
  state: RecordState;
  fencingToken: number;
  attempt: number;
  fingerprint: string;
  leaseExpiresAtMs: number | undefined;
  hasResult: boolean;
  result: string;
  error: string;
  createdAtMs: number;
  updatedAtMs: number;
  /** When the record is forgotten (the Redis key TTL). */
  expiresAtMs: number;
}

/**
 * {@link IdempotencyStore} in one process's memory, with the same semantics as the Lua scripts (the
 * contract tests run against both). For single-process consumers, local development and fast unit tests;
 * it protects nothing across processes. Arguments are checked exactly as the Redis store checks them.
 */
export class MemoryIdempotencyStore implements IdempotencyStore {
  readonly #records = new Map<string, MutableRecord>();
  readonly #now: () => number;
  readonly #maxKeyBytes: number;

  constructor(options: MemoryIdempotencyStoreOptions = {}) {
    this.#now = options.now ?? Date.now;
    this.#maxKeyBytes = options.maxKeyBytes ?? DEFAULT_MAX_KEY_BYTES;
  }

  /** Number of records held (expired ones are dropped first). */
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
      buildRecordKey('mem', r.id, this.#maxKeyBytes);
      scriptArgs.claim(r.options);
    }
    return requests.map((r) => this.#claim(r.id, r.options));
  }

  #claim(id: RecordId, options: ClaimOptions): ClaimReply {
    const key = buildRecordKey('mem', id, this.#maxKeyBytes);
    const [leaseMs, retentionMs, fingerprint, maxAttempts] = scriptArgs.claim(options) as [
      number,
      number,
      string,
      number,
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
      return { outcome: 'FAILED', fencingToken: rec.fencingToken, attempt: rec.attempt, error: rec.error };
    }
    let outcome: 'ACQUIRED' | 'ACQUIRED_STALE' = 'ACQUIRED';
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
      outcome = 'ACQUIRED_STALE';
    }
    if (rec && maxAttempts > 0 && rec.attempt >= maxAttempts) {
      let error = `ATTEMPTS_EXHAUSTED: ${rec.attempt} of ${maxAttempts} attempts used`;
      if (rec.state === 'IN_PROGRESS') error += ', the last one lost its lease';
      Object.assign(rec, { state: 'FAILED', error, updatedAtMs: now, leaseExpiresAtMs: undefined });
      rec.expiresAtMs = now + retentionMs;
      return { outcome: 'FAILED', fencingToken: rec.fencingToken, attempt: rec.attempt, error };
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
      createdAtMs: now,
      updatedAtMs: now,
      expiresAtMs: 0,
    };
    next.state = 'IN_PROGRESS';
    next.fencingToken += 1;
    next.attempt += 1;
    next.leaseExpiresAtMs = now + leaseMs;
    next.updatedAtMs = now;
    next.expiresAtMs = now + leaseMs + retentionMs;
    if (next.fingerprint === '' && fingerprint !== '') next.fingerprint = fingerprint;
    this.#records.set(key, next);
    return {
      outcome,
      fencingToken: next.fencingToken,
      attempt: next.attempt,
      leaseExpiresAtMs: next.leaseExpiresAtMs,
      serverTimeMs: now,
    };
  }

  async complete(
    id: RecordId,
    fencingToken: number,
    options: { retentionMs: number; result?: string },
  ): Promise<WriteReply> {
    scriptArgs.complete(fencingToken, options.retentionMs, options.result);
    return this.#write(id, fencingToken, (rec, now) => {
      rec.state = 'COMPLETED';
      rec.hasResult = options.result !== undefined;
      rec.result = options.result ?? '';
      rec.expiresAtMs = now + options.retentionMs;
    });
  }

  async release(id: RecordId, fencingToken: number, options: { retentionMs: number }): Promise<WriteReply> {
    scriptArgs.release(fencingToken, options.retentionMs);
    return this.#write(id, fencingToken, (rec, now) => {
      rec.state = 'RELEASED';
      rec.expiresAtMs = now + options.retentionMs;
    });
  }

  async fail(
    id: RecordId,
    fencingToken: number,
    options: { retentionMs: number; error: string },
  ): Promise<WriteReply> {
    scriptArgs.fail(fencingToken, options.retentionMs, options.error);
    return this.#write(id, fencingToken, (rec, now) => {
      rec.state = 'FAILED';
      rec.error = String(options.error);
      rec.expiresAtMs = now + options.retentionMs;
    });
  }

  async extend(
    id: RecordId,
    fencingToken: number,
    options: { leaseMs: number; retentionMs: number },
  ): Promise<ExtendReply> {
    scriptArgs.extend(fencingToken, options.leaseMs, options.retentionMs);
    const key = buildRecordKey('mem', id, this.#maxKeyBytes);
    const now = this.#now();
    const rec = this.#read(key, now);
    if (rec?.state !== 'IN_PROGRESS' || rec.fencingToken !== fencingToken) return leaseLost(rec);
    rec.leaseExpiresAtMs = now + options.leaseMs;
    rec.updatedAtMs = now;
    rec.expiresAtMs = now + options.leaseMs + options.retentionMs;
    return { ok: true, leaseExpiresAtMs: rec.leaseExpiresAtMs, serverTimeMs: now };
  }

  async get(id: RecordId): Promise<IdempotencyRecord | null> {
    const now = this.#now();
    const rec = this.#read(buildRecordKey('mem', id, this.#maxKeyBytes), now);
    if (!rec) return null;
    return {
      state: rec.state,
      fencingToken: rec.fencingToken,
      attempt: rec.attempt,
      fingerprint: rec.fingerprint,
      leaseExpiresAtMs: rec.state === 'IN_PROGRESS' ? rec.leaseExpiresAtMs : undefined,
      result: rec.state === 'COMPLETED' && rec.hasResult ? rec.result : undefined,
      error: rec.state === 'FAILED' ? rec.error : undefined,
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

  #write(id: RecordId, fencingToken: number, apply: (rec: MutableRecord, now: number) => void): WriteReply {
    const now = this.#now();
    const rec = this.#read(buildRecordKey('mem', id, this.#maxKeyBytes), now);
    if (rec?.state !== 'IN_PROGRESS' || rec.fencingToken !== fencingToken) return leaseLost(rec);
    apply(rec, now);
    rec.updatedAtMs = now;
    rec.leaseExpiresAtMs = undefined;
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
