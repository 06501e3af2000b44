/**
 * The store contract: one table row per transition of the state table of docs/design.md#the-record-and-its-states (plus fencing and
 * fingerprint rows), run against every {@link IdempotencyStore}: `MemoryIdempotencyStore` in the unit
 * project (fake clock) and `RedisIdempotencyStore` on real Redis, standalone and Cluster, in the
 * integration project (server clock). Both must give the same replies and leave the same records.
 *
 * Only types come from the core here, so the module can be imported by both Jest projects.
 */
import type {
  AcquiredReply,
  ClaimOptions,
  ClaimReply,
  ExtendReply,
  IdempotencyRecord,
  IdempotencyStore,
  MarkDeadLetteredReply,
  RecordId,
  RecordState,
  StartReply,
  WriteReply,
} from '@idempotent-consumer/core';

/** The store's clock, as a contract run sees it. */
export interface ContractClock {
  /** The store's clock now, in ms since the epoch (Redis: `TIME`; memory: the injected clock). */
  now(): Promise<number>;
  /** Resolves once the store's clock is past `atMs` (Redis: polls `TIME`; memory: moves the fake clock). */
  passTime(atMs: number): Promise<void>;
}

/** How a record is lost behind its holder's back. */
export type RecordLoss = 'del' | 'pexpire';

/** One store under test. */
export interface ContractTarget {
  readonly store: IdempotencyStore;
  readonly clock: ContractClock;
  /**
   * Makes the store lose a record while it may be held (Redis: `DEL`, or `PEXPIRE 1` and wait; a store
   * without such commands lets its clock pass the record's TTL). Resolves once the record is gone.
   */
  loseRecord(id: RecordId, how: RecordLoss): Promise<void>;
  /** Releases what the store opened by itself (the Redis store's notification connection). */
  close?(): void;
}

/**
 * Placeholder for "the token of the n-th successful claim in this row" (1-based) in a row's expected
 * reply or record: tokens come from the store's clock, so rows name them by order, never by value.
 */
export class TokenRef {
  constructor(readonly n: number) {}
}

/** The token of the n-th successful claim of the row. */
export const T = (n: number): TokenRef => new TokenRef(n);

/** Timings of a contract run, in milliseconds. */
export interface ContractSettings {
  /** A lease that is made to expire (Redis: short, e.g. 100). */
  readonly shortLeaseMs: number;
  /** A retention that is made to lapse (Redis: short, e.g. 100). */
  readonly shortRetentionMs: number;
  /** How far below the expected value a measured TTL may be (network and scheduling delays). */
  readonly ttlSlackMs: number;
  /** A unique scope per run, so runs against a shared Redis never see each other's records. */
  readonly scope: string;
}

/** A lease that never expires during a row. */
export const LONG_LEASE_MS = 30_000;
/** Retention of rows that check TTLs. */
export const RETENTION_MS = 600_000;
/**
 * The end of the `ATTEMPTS_EXHAUSTED` text when the record is marked stale (`b`) and no handler started
 * since: the last attempt that ran recorded no outcome, and the record cannot tell which way.
 */
export const NO_OUTCOME =
  'the last one recorded no outcome (abandoned by its handler timeout, or its lease lapsed)';
/** Fingerprint of the payload most rows use. */
export const FP_A = 'a'.repeat(64);
/** Another payload's fingerprint. */
export const FP_B = 'b'.repeat(64);

type Write = 'complete' | 'release' | 'fail' | 'extend' | 'start';
type AnyReply = ClaimReply | WriteReply | ExtendReply | StartReply | MarkDeadLetteredReply;

/** Drives one record through a row: remembers the last token and lease, waits on the store's clock. */
export class ContractKit {
  /** Token of the last successful claim (0 before any). */
  token = 0;
  /** Tokens of every successful claim of the row, in order. */
  readonly tokens: number[] = [];
  /** Lease of the last claim or extension, for TTL checks. */
  leaseMs = LONG_LEASE_MS;

  constructor(
    readonly target: ContractTarget,
    readonly id: RecordId,
    readonly settings: ContractSettings,
  ) {}

  get store(): IdempotencyStore {
    return this.target.store;
  }

  /** Claims with a long lease, {@link FP_A}, unlimited attempts, unless overridden. */
  async claim(options: Partial<ClaimOptions> = {}): Promise<ClaimReply> {
    const o: ClaimOptions = {
      leaseMs: LONG_LEASE_MS,
      retentionMs: RETENTION_MS,
      fingerprint: FP_A,
      maxAttempts: 0,
      ...options,
    };
    const reply = await this.store.claim(this.id, o);
    if (reply.outcome === 'ACQUIRED' || reply.outcome === 'ACQUIRED_STALE') {
      this.token = reply.fencingToken;
      this.tokens.push(reply.fencingToken);
      this.leaseMs = o.leaseMs;
    }
    return reply;
  }

  /** Claims with a short lease and waits (on the store's clock) until it has expired. */
  async claimAndExpire(options: Partial<ClaimOptions> = {}): Promise<ClaimReply> {
    const reply = await this.claim({ leaseMs: this.settings.shortLeaseMs, ...options });
    await this.expireLease();
    return reply;
  }

  /** Waits until the store's clock is past the record's lease end. */
  async expireLease(): Promise<void> {
    const rec = await this.store.get(this.id);
    if (!rec?.leaseExpiresAtMs) throw new Error(`no lease to expire: ${JSON.stringify(rec)}`);
    await this.target.clock.passTime(rec.leaseExpiresAtMs);
  }

  /** Waits until the store has forgotten the record (its TTL lapsed). */
  async forget(): Promise<void> {
    const rec = await this.store.get(this.id);
    if (!rec) return;
    await this.target.clock.passTime((await this.target.clock.now()) + rec.ttlMs);
    const deadline = Date.now() + 10_000;
    while ((await this.store.get(this.id)) !== null) {
      if (Date.now() > deadline) throw new Error('the record outlived its TTL');
      await new Promise((r) => setTimeout(r, 10));
    }
  }

  /** Loses the record behind the holder's back (see {@link ContractTarget.loseRecord}). */
  lose(how: RecordLoss): Promise<void> {
    return this.target.loseRecord(this.id, how);
  }

  /** Completes with the result `j"result"`; `result: null` completes without one. */
  complete(token = this.token, result: string | null = 'j"result"', retentionMs = RETENTION_MS) {
    return this.store.complete(this.id, token, { retentionMs, result: result ?? undefined });
  }

  release(token = this.token, retentionMs = RETENTION_MS) {
    return this.store.release(this.id, token, { retentionMs });
  }

  /**
   * Gives back a claim whose handler never ran, as `Idempotency.release` does (`abandoned` when the claim
   * was ACQUIRED_STALE).
   */
  releaseNeverStarted(token = this.token, abandoned = false) {
    return this.store.release(this.id, token, { retentionMs: RETENTION_MS, neverStarted: true, abandoned });
  }

  /** Releases as the runner does after `handlerTimeoutMs`: the handler may still be running. */
  releaseAbandoned(token = this.token) {
    return this.store.release(this.id, token, { retentionMs: RETENTION_MS, abandoned: true });
  }

  fail(token = this.token, retentionMs = RETENTION_MS) {
    return this.store.fail(this.id, token, { retentionMs, error: 'Error: boom' });
  }

  /** Fails as the runner does after `handlerTimeoutMs` at the last attempt: the handler may still be running. */
  failAbandoned(token = this.token) {
    return this.store.fail(this.id, token, {
      retentionMs: RETENTION_MS,
      error: 'Error: boom',
      abandoned: true,
    });
  }

  async extend(token = this.token, leaseMs = LONG_LEASE_MS) {
    const reply = await this.store.extend(this.id, token, { leaseMs, retentionMs: RETENTION_MS });
    if (reply.ok) this.leaseMs = leaseMs;
    return reply;
  }

  async start(token = this.token, leaseMs = LONG_LEASE_MS) {
    const reply = await this.store.start(this.id, token, { leaseMs, retentionMs: RETENTION_MS });
    if (reply.ok) this.leaseMs = leaseMs;
    return reply;
  }

  markDeadLettered(token = this.token) {
    return this.store.markDeadLettered(this.id, token);
  }

  /** Any fenced write by name, with the given token. */
  write(op: Write, token: number): Promise<WriteReply | ExtendReply | StartReply> {
    return this[op](token);
  }

  get(): Promise<IdempotencyRecord | null> {
    return this.store.get(this.id);
  }

  /** `expected` with every {@link TokenRef} replaced by the token it names. */
  resolve<V>(expected: V): V {
    if (expected instanceof TokenRef) {
      const token = this.tokens[expected.n - 1];
      if (token === undefined) throw new Error(`the row made no claim #${expected.n}`);
      return token as V;
    }
    if (expected && typeof expected === 'object' && Object.getPrototypeOf(expected) === Object.prototype) {
      return Object.fromEntries(Object.entries(expected).map(([k, v]) => [k, this.resolve(v)])) as V;
    }
    return expected;
  }
}

/** One row: a starting state (`given`), one step (`when`), and what must follow. */
export interface ContractRow {
  /** The transition, written `FROM —step→ TO: reply`. */
  readonly transition: string;
  readonly given?: (k: ContractKit) => Promise<unknown>;
  readonly when: (k: ContractKit) => Promise<AnyReply>;
  /** Matched with `toMatchObject`; a function for checks that need the kit. */
  readonly reply: Record<string, unknown> | ((reply: AnyReply, k: ContractKit) => void | Promise<void>);
  /**
   * The record afterwards: matched with `toMatchObject`, `null` for none, or `unchanged` (equal to the
   * record before the step, apart from a TTL that only ran down).
   */
  readonly record: Record<string, unknown> | null | 'unchanged';
  /** The record's TTL afterwards: the last lease plus the retention (in progress), or the retention. */
  readonly ttl?: 'lease+retention' | 'retention';
}

const completed = (k: ContractKit) => k.claim().then(() => k.complete());
const released = (k: ContractKit) => k.claim().then(() => k.release());
const failed = (k: ContractKit) => k.claim().then(() => k.fail());
const reclaimed = (k: ContractKit) =>
  k
    .claimAndExpire()
    .then(() => k.claim())
    .then(() => undefined);

/**
 * The row of a claim with `maxAttempts` 1 on a record that `given` left stale (`b`) with one attempt
 * counted and no handler started since: FAILED, `ATTEMPTS_EXHAUSTED` ending in {@link NO_OUTCOME}, the
 * token of the row's claim number `token` kept, the lease and the marks dropped.
 */
const exhaustedOnStale = (
  transition: string,
  given: NonNullable<ContractRow['given']>,
  token: number,
): ContractRow => ({
  transition,
  given,
  when: (k) => k.claim({ maxAttempts: 1 }),
  reply: {
    outcome: 'FAILED',
    fencingToken: T(token),
    attempt: 1,
    error: `ATTEMPTS_EXHAUSTED: 1 of 1 attempts used, ${NO_OUTCOME}`,
  },
  // Not lapsed: the stale record's last handler was abandoned or given back, its holder cannot complete.
  // Still abandoned: an operator's release (lua/admin-release.lua) makes the next claim ACQUIRED_STALE.
  record: {
    state: 'FAILED',
    attempt: 1,
    abandoned: true,
    reserved: false,
    lapsed: false,
    leaseExpiresAtMs: undefined,
  },
  ttl: 'retention',
});

/** Starting states of the fencing rows, with the token they present and the reply they expect. */
const FENCING_STATES: {
  name: string;
  given: (k: ContractKit) => Promise<unknown>;
  token: (k: ContractKit) => number;
  currentFencingToken: TokenRef | 0;
  state: RecordState | null;
}[] = [
  {
    name: 'IN_PROGRESS, re-claimed by another worker after its lease expired (the old token)',
    given: reclaimed,
    token: (k) => k.tokens[0]!,
    currentFencingToken: T(2),
    state: 'IN_PROGRESS',
  },
  {
    name: 'IN_PROGRESS, a token from the future',
    given: (k) => k.claim(),
    token: (k) => k.token + 1,
    currentFencingToken: T(1),
    state: 'IN_PROGRESS',
  },
  {
    name: 'COMPLETED (the token that completed it)',
    given: completed,
    token: (k) => k.token,
    currentFencingToken: T(1),
    state: 'COMPLETED',
  },
  {
    name: 'RELEASED (the token that released it)',
    given: released,
    token: (k) => k.token,
    currentFencingToken: T(1),
    state: 'RELEASED',
  },
  {
    name: 'FAILED (the token that failed it)',
    given: failed,
    token: (k) => k.token,
    currentFencingToken: T(1),
    state: 'FAILED',
  },
  {
    name: 'IN_PROGRESS, the record deleted (DEL) and claimed again (the old holder)',
    given: (k) =>
      k
        .claim()
        .then(() => k.lose('del'))
        .then(() => k.claim()),
    token: (k) => k.tokens[0]!,
    currentFencingToken: T(2),
    state: 'IN_PROGRESS',
  },
  {
    name: 'IN_PROGRESS, the record expired (PEXPIRE) and claimed again (the old holder)',
    given: (k) =>
      k
        .claim()
        .then(() => k.lose('pexpire'))
        .then(() => k.claim()),
    token: (k) => k.tokens[0]!,
    currentFencingToken: T(2),
    state: 'IN_PROGRESS',
  },
  {
    name: 'IN_PROGRESS, the record deleted (DEL), nobody claimed since (the old holder)',
    given: (k) => k.claim().then(() => k.lose('del')),
    token: (k) => k.tokens[0]!,
    currentFencingToken: 0,
    state: null,
  },
  { name: '(none)', given: async () => {}, token: () => 1, currentFencingToken: 0, state: null },
];

/** Every state a record can be in, for the fingerprint rows. */
const ALL_STATES: { name: string; given: (k: ContractKit) => Promise<unknown>; state: RecordState }[] = [
  { name: 'IN_PROGRESS (live lease)', given: (k) => k.claim(), state: 'IN_PROGRESS' },
  { name: 'IN_PROGRESS (lease expired)', given: (k) => k.claimAndExpire(), state: 'IN_PROGRESS' },
  { name: 'COMPLETED', given: completed, state: 'COMPLETED' },
  { name: 'RELEASED', given: released, state: 'RELEASED' },
  { name: 'FAILED', given: failed, state: 'FAILED' },
];

/** The table. Each row runs on a fresh key. */
export function contractRows(settings: ContractSettings): ContractRow[] {
  const rows: ContractRow[] = [
    // ── claim ──────────────────────────────────────────────────────────────────────────────────────────
    {
      transition: '(none) —claim→ IN_PROGRESS: ACQUIRED, token 1, attempt 1, lease on the store clock',
      when: (k) => k.claim(),
      reply: (r, k) => {
        expect(r).toMatchObject(k.resolve({ outcome: 'ACQUIRED', fencingToken: T(1), attempt: 1 }));
        const a = r as AcquiredReply;
        expect(a.leaseExpiresAtMs - a.serverTimeMs).toBe(LONG_LEASE_MS);
      },
      record: { state: 'IN_PROGRESS', fencingToken: T(1), attempt: 1, fingerprint: FP_A, result: undefined },
      ttl: 'lease+retention',
    },
    {
      transition: 'IN_PROGRESS (live lease) —claim→ IN_PROGRESS: CONFLICT with the remaining lease',
      given: (k) => k.claim(),
      when: (k) => k.claim(),
      reply: (r, k) => {
        expect(r).toMatchObject(k.resolve({ outcome: 'CONFLICT', fencingToken: T(1), attempt: 1 }));
        const c = r as Extract<ClaimReply, { outcome: 'CONFLICT' }>;
        expect(c.remainingLeaseMs).toBeGreaterThan(0);
        expect(c.remainingLeaseMs).toBeLessThanOrEqual(LONG_LEASE_MS);
      },
      record: 'unchanged',
    },
    {
      transition: 'IN_PROGRESS (lease expired) —claim→ IN_PROGRESS: ACQUIRED_STALE, token and attempt + 1',
      given: (k) => k.claimAndExpire(),
      when: (k) => k.claim(),
      reply: { outcome: 'ACQUIRED_STALE', fencingToken: T(2), attempt: 2 },
      record: { state: 'IN_PROGRESS', fencingToken: T(2), attempt: 2, fingerprint: FP_A },
      ttl: 'lease+retention',
    },
    {
      transition: 'IN_PROGRESS (lease expired) at maxAttempts —claim→ FAILED: ATTEMPTS_EXHAUSTED, lost lease',
      given: (k) => k.claimAndExpire({ maxAttempts: 1 }),
      when: (k) => k.claim({ maxAttempts: 1 }),
      reply: (r, k) => {
        expect(r).toMatchObject(k.resolve({ outcome: 'FAILED', fencingToken: T(1), attempt: 1 }));
        expect((r as { error: string }).error).toMatch(/^ATTEMPTS_EXHAUSTED: 1 of 1 .*lost its lease/);
      },
      // lapsed: FAILED only because the last lease lapsed (l), the holder may still complete.
      record: { state: 'FAILED', fencingToken: T(1), attempt: 1, leaseExpiresAtMs: undefined, lapsed: true },
      ttl: 'retention',
    },
    // ── complete ───────────────────────────────────────────────────────────────────────────────────────
    {
      transition: 'IN_PROGRESS —complete(token, result)→ COMPLETED: OK, TTL = retention',
      given: (k) => k.claim(),
      when: (k) => k.complete(),
      reply: { ok: true },
      record: {
        state: 'COMPLETED',
        fencingToken: T(1),
        attempt: 1,
        result: 'j"result"',
        leaseExpiresAtMs: undefined,
      },
      ttl: 'retention',
    },
    {
      transition: 'IN_PROGRESS —complete(token, no result)→ COMPLETED without a result',
      given: (k) => k.claim(),
      when: (k) => k.complete(k.token, null),
      reply: { ok: true },
      record: { state: 'COMPLETED', result: undefined },
      ttl: 'retention',
    },
    {
      transition: 'IN_PROGRESS (lease expired, nobody re-claimed) —complete(token)→ COMPLETED',
      given: (k) => k.claimAndExpire(),
      when: (k) => k.complete(),
      reply: { ok: true },
      record: { state: 'COMPLETED', fencingToken: T(1), result: 'j"result"' },
      ttl: 'retention',
    },
    {
      transition: 'COMPLETED —claim→ COMPLETED: DUPLICATE replays the stored result',
      given: completed,
      when: (k) => k.claim(),
      reply: async (r, k) => {
        const rec = await k.get();
        expect(r).toEqual({
          outcome: 'DUPLICATE',
          fencingToken: k.tokens[0],
          attempt: 1,
          result: 'j"result"',
          completedAtMs: rec?.updatedAtMs,
        });
      },
      record: 'unchanged',
    },
    {
      transition: 'COMPLETED without a result —claim→ DUPLICATE with result undefined',
      given: (k) => k.claim().then(() => k.complete(k.token, null)),
      when: (k) => k.claim(),
      reply: { outcome: 'DUPLICATE', result: undefined },
      record: 'unchanged',
    },
    {
      transition: 'COMPLETED —(retention lapses)→ (none): the next claim is attempt 1, with a greater token',
      given: (k) =>
        k
          .claim()
          .then(() => k.complete(k.token, 'j1', settings.shortRetentionMs))
          .then(() => k.forget()),
      when: (k) => k.claim(),
      reply: { outcome: 'ACQUIRED', fencingToken: T(2), attempt: 1 },
      record: { state: 'IN_PROGRESS', fencingToken: T(2), attempt: 1 },
      ttl: 'lease+retention',
    },
    // ── release ────────────────────────────────────────────────────────────────────────────────────────
    {
      transition: 'IN_PROGRESS —release(token)→ RELEASED: OK, attempt kept, TTL = retention',
      given: (k) => k.claim(),
      when: (k) => k.release(),
      reply: { ok: true },
      record: {
        state: 'RELEASED',
        fencingToken: T(1),
        attempt: 1,
        fingerprint: FP_A,
        leaseExpiresAtMs: undefined,
      },
      ttl: 'retention',
    },
    {
      transition: 'RELEASED —claim→ IN_PROGRESS: ACQUIRED, token 2, attempt 2 (attempts survive release)',
      given: released,
      when: (k) => k.claim(),
      reply: { outcome: 'ACQUIRED', fencingToken: T(2), attempt: 2 },
      record: { state: 'IN_PROGRESS', fencingToken: T(2), attempt: 2 },
      ttl: 'lease+retention',
    },
    {
      transition: 'RELEASED below maxAttempts —claim→ IN_PROGRESS: ACQUIRED, attempt = maxAttempts',
      given: (k) => k.claim({ maxAttempts: 2 }).then(() => k.release()),
      when: (k) => k.claim({ maxAttempts: 2 }),
      reply: { outcome: 'ACQUIRED', fencingToken: T(2), attempt: 2 },
      record: { state: 'IN_PROGRESS', attempt: 2 },
      ttl: 'lease+retention',
    },
    {
      transition: 'RELEASED at maxAttempts —claim→ FAILED: ATTEMPTS_EXHAUSTED, TTL = retention',
      given: async (k) => {
        for (let i = 0; i < 2; i++) {
          await k.claim({ maxAttempts: 2 });
          await k.release();
        }
      },
      when: (k) => k.claim({ maxAttempts: 2 }),
      reply: (r, k) => {
        expect(r).toMatchObject(k.resolve({ outcome: 'FAILED', fencingToken: T(2), attempt: 2 }));
        expect((r as { error: string }).error).toBe('ATTEMPTS_EXHAUSTED: 2 of 2 attempts used');
      },
      record: {
        state: 'FAILED',
        fencingToken: T(2),
        attempt: 2,
        error: 'ATTEMPTS_EXHAUSTED: 2 of 2 attempts used',
        lapsed: false, // exhausted by releases, no lease lapsed
      },
      ttl: 'retention',
    },
    {
      transition: 'RELEASED —claim with maxAttempts 0→ ACQUIRED: 0 means unlimited (attempt 6)',
      given: async (k) => {
        for (let i = 0; i < 5; i++) {
          await k.claim({ maxAttempts: 0 });
          await k.release();
        }
      },
      when: (k) => k.claim({ maxAttempts: 0 }),
      reply: { outcome: 'ACQUIRED', fencingToken: T(6), attempt: 6 },
      record: { state: 'IN_PROGRESS', attempt: 6 },
      ttl: 'lease+retention',
    },
    // ── release of an abandoned handler (handlerTimeoutMs: it may still be running) ────────────────────
    {
      transition: 'IN_PROGRESS —release(token, abandoned)→ RELEASED, abandoned: OK, attempt kept',
      given: (k) => k.claim(),
      when: (k) => k.releaseAbandoned(),
      reply: { ok: true },
      record: { state: 'RELEASED', fencingToken: T(1), attempt: 1, abandoned: true },
      ttl: 'retention',
    },
    {
      transition:
        'RELEASED abandoned —claim→ ACQUIRED_STALE (the earlier handler may be partial or still running), mark cleared',
      given: (k) => k.claim().then(() => k.releaseAbandoned()),
      when: (k) => k.claim(),
      reply: { outcome: 'ACQUIRED_STALE', fencingToken: T(2), attempt: 2, started: true },
      record: { state: 'IN_PROGRESS', fencingToken: T(2), attempt: 2, abandoned: false },
      ttl: 'lease+retention',
    },
    {
      transition:
        'RELEASED abandoned —reserve, release, claim→ ACQUIRED_STALE: the mark stays until a handler starts',
      given: async (k) => {
        await k.claim();
        await k.releaseAbandoned();
        expect(await k.claim({ reserve: true })).toMatchObject({ outcome: 'ACQUIRED_STALE', started: false });
        expect(await k.get()).toMatchObject({ reserved: true, abandoned: true });
        await k.release();
      },
      when: (k) => k.claim(),
      reply: { outcome: 'ACQUIRED_STALE', fencingToken: T(3), attempt: 2, started: true },
      record: { state: 'IN_PROGRESS', attempt: 2, abandoned: false },
      ttl: 'lease+retention',
    },
    {
      transition: 'RELEASED abandoned, reserved —start(token)→ a handler runs: the mark is cleared',
      given: (k) =>
        k
          .claim()
          .then(() => k.releaseAbandoned())
          .then(() => k.claim({ reserve: true })),
      when: (k) => k.start(),
      reply: { ok: true, attempt: 2 },
      record: { state: 'IN_PROGRESS', attempt: 2, reserved: false, abandoned: false },
      ttl: 'lease+retention',
    },
    exhaustedOnStale(
      'RELEASED abandoned at maxAttempts —claim→ FAILED: ATTEMPTS_EXHAUSTED, the last attempt recorded no outcome',
      (k) => k.claim({ maxAttempts: 1 }).then(() => k.releaseAbandoned()),
      1,
    ),
    // The mark `b` also stands for a lapsed handler (a reservation or a give-back that took over from it), so
    // the FAILED text names both causes: the record cannot tell them apart. maxAttempts lowered meanwhile.
    exhaustedOnStale(
      'IN_PROGRESS reserved, taken over from a lapsed handler, given back, at maxAttempts —claim→ FAILED: does not blame a handler timeout',
      (k) =>
        k
          .claimAndExpire()
          .then(() => k.claim({ reserve: true }))
          .then(() => k.releaseNeverStarted(k.token, true)),
      2,
    ),
    exhaustedOnStale(
      'IN_PROGRESS reserved, taken over from a lapsed handler, lapsed before start, at maxAttempts —claim→ FAILED: does not blame a handler timeout',
      async (k) => {
        await k.claimAndExpire();
        await k.claim({ reserve: true, leaseMs: settings.shortLeaseMs });
        await k.expireLease();
      },
      2,
    ),
    exhaustedOnStale(
      'IN_PROGRESS, taken over (counted) from a lapsed handler, given back unrun, at maxAttempts —claim→ FAILED: does not blame a handler timeout',
      (k) =>
        k
          .claimAndExpire()
          .then(() => k.claim())
          .then(() => k.releaseNeverStarted(k.token, true)),
      2,
    ),
    {
      transition: 'RELEASED —(retention lapses)→ (none): attempts are forgotten',
      given: (k) =>
        k
          .claim()
          .then(() => k.release(k.token, settings.shortRetentionMs))
          .then(() => k.forget()),
      when: (k) => k.claim(),
      reply: { outcome: 'ACQUIRED', fencingToken: T(2), attempt: 1 },
      record: { state: 'IN_PROGRESS', attempt: 1 },
      ttl: 'lease+retention',
    },
    // ── fail ───────────────────────────────────────────────────────────────────────────────────────────
    {
      transition: 'IN_PROGRESS —fail(token, error)→ FAILED (terminal): OK, TTL = retention',
      given: (k) => k.claim(),
      when: (k) => k.fail(),
      reply: { ok: true },
      record: {
        state: 'FAILED',
        fencingToken: T(1),
        error: 'Error: boom',
        leaseExpiresAtMs: undefined,
        abandoned: false,
      },
      ttl: 'retention',
    },
    {
      transition:
        'IN_PROGRESS —fail(token, error, abandoned)→ FAILED, abandoned (the handler may still run): OK, TTL = retention',
      given: (k) => k.claim(),
      when: (k) => k.failAbandoned(),
      reply: { ok: true },
      // An operator's release (lua/admin-release.lua) makes the claim after it ACQUIRED_STALE.
      record: {
        state: 'FAILED',
        fencingToken: T(1),
        attempt: 1,
        error: 'Error: boom',
        leaseExpiresAtMs: undefined,
        abandoned: true,
        lapsed: false,
      },
      ttl: 'retention',
    },
    {
      transition: 'FAILED abandoned —claim→ FAILED: the recorded error, nothing changed',
      given: (k) => k.claim().then(() => k.failAbandoned()),
      when: (k) => k.claim(),
      reply: { outcome: 'FAILED', fencingToken: T(1), attempt: 1, error: 'Error: boom', deadLettered: false },
      record: 'unchanged',
    },
    {
      transition: 'FAILED —claim→ FAILED: the recorded error, nothing changed',
      given: failed,
      when: (k) => k.claim(),
      reply: { outcome: 'FAILED', fencingToken: T(1), attempt: 1, error: 'Error: boom', deadLettered: false },
      record: 'unchanged',
    },
    {
      transition: 'FAILED —(retention lapses)→ (none): the next claim acquires',
      given: (k) =>
        k
          .claim()
          .then(() => k.fail(k.token, settings.shortRetentionMs))
          .then(() => k.forget()),
      when: (k) => k.claim(),
      reply: { outcome: 'ACQUIRED', fencingToken: T(2), attempt: 1 },
      record: { state: 'IN_PROGRESS' },
      ttl: 'lease+retention',
    },
    // ── extend ─────────────────────────────────────────────────────────────────────────────────────────
    {
      transition:
        'IN_PROGRESS —extend(token, leaseMs)→ IN_PROGRESS: lease = now + leaseMs, TTL = lease + retention',
      given: (k) => k.claim(),
      when: (k) => k.extend(k.token, 2 * LONG_LEASE_MS),
      reply: async (r, k) => {
        expect(r).toMatchObject({ ok: true });
        const e = r as Extract<ExtendReply, { ok: true }>;
        expect(e.leaseExpiresAtMs - e.serverTimeMs).toBe(2 * LONG_LEASE_MS);
        expect((await k.get())?.leaseExpiresAtMs).toBe(e.leaseExpiresAtMs);
      },
      record: { state: 'IN_PROGRESS', fencingToken: T(1), attempt: 1 },
      ttl: 'lease+retention',
    },
    {
      transition: 'IN_PROGRESS (lease expired, nobody re-claimed) —extend(token)→ IN_PROGRESS, live again',
      given: (k) => k.claimAndExpire(),
      when: (k) => k.extend(),
      reply: { ok: true },
      record: { state: 'IN_PROGRESS', fencingToken: T(1) },
      ttl: 'lease+retention',
    },
    {
      transition: 'IN_PROGRESS (extended) —claim→ CONFLICT: the extension holds off other claimers',
      given: (k) => k.claimAndExpire().then(() => k.extend()),
      when: (k) => k.claim(),
      reply: { outcome: 'CONFLICT', fencingToken: T(1) },
      record: 'unchanged',
    },
    // ── fingerprint ────────────────────────────────────────────────────────────────────────────────────
    {
      transition: 'COMPLETED —claim without a fingerprint→ DUPLICATE: no payload comparison',
      given: completed,
      when: (k) => k.claim({ fingerprint: '' }),
      reply: { outcome: 'DUPLICATE' },
      record: 'unchanged',
    },
    {
      transition:
        'RELEASED (claimed without a fingerprint) —claim with one→ ACQUIRED, the fingerprint is stored',
      given: (k) => k.claim({ fingerprint: '' }).then(() => k.release()),
      when: (k) => k.claim({ fingerprint: FP_B }),
      reply: { outcome: 'ACQUIRED', fencingToken: T(2) },
      record: { state: 'IN_PROGRESS', fingerprint: FP_B },
      ttl: 'lease+retention',
    },
    // ── a lost record: tokens never repeat ────────────────────────────────────────────────────────────
    {
      transition: 'IN_PROGRESS —(DEL)→ (none) —claim→ ACQUIRED: attempt 1 again, a greater token',
      given: (k) => k.claim().then(() => k.lose('del')),
      when: (k) => k.claim(),
      reply: { outcome: 'ACQUIRED', fencingToken: T(2), attempt: 1 },
      record: { state: 'IN_PROGRESS', fencingToken: T(2), attempt: 1 },
      ttl: 'lease+retention',
    },
    {
      transition: 'IN_PROGRESS —(PEXPIRE)→ (none) —claim→ ACQUIRED: attempt 1 again, a greater token',
      given: (k) => k.claim().then(() => k.lose('pexpire')),
      when: (k) => k.claim(),
      reply: { outcome: 'ACQUIRED', fencingToken: T(2), attempt: 1 },
      record: { state: 'IN_PROGRESS', fencingToken: T(2), attempt: 1 },
      ttl: 'lease+retention',
    },
    {
      transition:
        'lost and re-claimed —complete(old token)→ LEASE_LOST: the old holder cannot record its result',
      given: (k) =>
        k
          .claim()
          .then(() => k.lose('del'))
          .then(() => k.claim()),
      when: (k) => k.complete(k.tokens[0]),
      reply: { ok: false, reason: 'LEASE_LOST', currentFencingToken: T(2), state: 'IN_PROGRESS' },
      record: 'unchanged',
    },
    // ── reservations (claim with reserve) and start ───────────────────────────────────────────────────
    {
      transition: '(none) —claim(reserve)→ IN_PROGRESS reserved: ACQUIRED, started false, no attempt counted',
      when: (k) => k.claim({ reserve: true }),
      reply: { outcome: 'ACQUIRED', fencingToken: T(1), attempt: 1, started: false },
      record: { state: 'IN_PROGRESS', fencingToken: T(1), attempt: 0, reserved: true },
      ttl: 'lease+retention',
    },
    {
      transition: 'IN_PROGRESS reserved —start(token)→ IN_PROGRESS: attempt 1 counted, lease renewed',
      given: (k) => k.claim({ reserve: true }),
      when: (k) => k.start(k.token, 2 * LONG_LEASE_MS),
      reply: async (r, k) => {
        expect(r).toMatchObject({ ok: true, attempt: 1 });
        const st = r as Extract<StartReply, { ok: true }>;
        expect(st.leaseExpiresAtMs - st.serverTimeMs).toBe(2 * LONG_LEASE_MS);
        expect((await k.get())?.leaseExpiresAtMs).toBe(st.leaseExpiresAtMs);
      },
      record: { state: 'IN_PROGRESS', attempt: 1, reserved: false },
      ttl: 'lease+retention',
    },
    {
      transition: 'IN_PROGRESS (counted claim) —start(token)→ attempt not counted twice',
      given: (k) => k.claim(),
      when: (k) => k.start(),
      reply: { ok: true, attempt: 1 },
      record: { state: 'IN_PROGRESS', attempt: 1, reserved: false },
      ttl: 'lease+retention',
    },
    {
      transition: 'IN_PROGRESS reserved, started —start(token) again→ attempt 1: counted once',
      given: (k) => k.claim({ reserve: true }).then(() => k.start()),
      when: (k) => k.start(),
      reply: { ok: true, attempt: 1 },
      record: { state: 'IN_PROGRESS', attempt: 1, reserved: false },
      ttl: 'lease+retention',
    },
    {
      transition:
        'IN_PROGRESS reserved —release(token)→ RELEASED: no attempt spent; the next claim is attempt 1',
      given: (k) => k.claim({ reserve: true, maxAttempts: 1 }).then(() => k.release()),
      when: (k) => k.claim({ maxAttempts: 1 }),
      reply: { outcome: 'ACQUIRED', fencingToken: T(2), attempt: 1, started: true },
      record: { state: 'IN_PROGRESS', attempt: 1 },
      ttl: 'lease+retention',
    },
    {
      transition:
        'IN_PROGRESS reserved (lease expired, never started) at maxAttempts —claim→ ACQUIRED, not stale, not FAILED',
      given: async (k) => {
        await k.claimAndExpire({ maxAttempts: 1, reserve: true });
      },
      when: (k) => k.claim({ maxAttempts: 1 }),
      reply: { outcome: 'ACQUIRED', fencingToken: T(2), attempt: 1, started: true },
      record: { state: 'IN_PROGRESS', attempt: 1, reserved: false },
      ttl: 'lease+retention',
    },
    // ── a reservation taken over from a handler whose lease lapsed ─────────────────────────────────────
    {
      transition:
        'IN_PROGRESS, lease lapsed mid-handler —claim(reserve)→ ACQUIRED_STALE, reserved and marked abandoned until a handler starts',
      given: (k) => k.claimAndExpire(),
      when: (k) => k.claim({ reserve: true }),
      reply: { outcome: 'ACQUIRED_STALE', fencingToken: T(2), attempt: 2, started: false },
      record: { state: 'IN_PROGRESS', attempt: 1, reserved: true, abandoned: true },
      ttl: 'lease+retention',
    },
    {
      transition:
        'IN_PROGRESS reserved, taken over from a lapsed handler —release, claim→ ACQUIRED_STALE: the give-back keeps it stale',
      given: (k) =>
        k
          .claimAndExpire()
          .then(() => k.claim({ reserve: true }))
          .then(() => k.release()),
      when: (k) => k.claim(),
      reply: { outcome: 'ACQUIRED_STALE', fencingToken: T(3), attempt: 2, started: true },
      record: { state: 'IN_PROGRESS', attempt: 2, abandoned: false },
      ttl: 'lease+retention',
    },
    {
      transition:
        'IN_PROGRESS reserved, taken over from a lapsed handler, lapsed before start (a crash) —claim→ ACQUIRED_STALE',
      given: async (k) => {
        await k.claimAndExpire();
        await k.claim({ reserve: true, leaseMs: settings.shortLeaseMs });
        await k.expireLease();
      },
      when: (k) => k.claim(),
      reply: { outcome: 'ACQUIRED_STALE', fencingToken: T(3), attempt: 2, started: true },
      record: { state: 'IN_PROGRESS', attempt: 2, abandoned: false },
      ttl: 'lease+retention',
    },
    // ── a claim given back by a holder that never ran its handler ─────────────────────────────────────
    {
      transition: 'IN_PROGRESS —release(token, neverStarted)→ RELEASED: the counted attempt is given back',
      given: (k) => k.claim(),
      when: (k) => k.releaseNeverStarted(),
      reply: { ok: true },
      record: { state: 'RELEASED', fencingToken: T(1), attempt: 0, abandoned: false },
      ttl: 'retention',
    },
    {
      transition:
        'RELEASED, attempt given back —claim with maxAttempts 1→ ACQUIRED attempt 1: only handlers that ran count',
      given: (k) => k.claim({ maxAttempts: 1 }).then(() => k.releaseNeverStarted()),
      when: (k) => k.claim({ maxAttempts: 1 }),
      reply: { outcome: 'ACQUIRED', fencingToken: T(2), attempt: 1, started: true },
      record: { state: 'IN_PROGRESS', attempt: 1 },
      ttl: 'lease+retention',
    },
    {
      transition:
        'IN_PROGRESS attempt 2 —release(token, neverStarted)→ attempt 1 kept: only the unrun attempt is given back',
      given: (k) =>
        k
          .claim()
          .then(() => k.release())
          .then(() => k.claim()),
      when: (k) => k.releaseNeverStarted(),
      reply: { ok: true },
      record: { state: 'RELEASED', fencingToken: T(2), attempt: 1 },
      ttl: 'retention',
    },
    {
      transition:
        'IN_PROGRESS reserved —release(token, neverStarted)→ RELEASED, attempt unchanged: a reservation counted none',
      given: (k) =>
        k
          .claim()
          .then(() => k.release())
          .then(() => k.claim({ reserve: true })),
      when: (k) => k.releaseNeverStarted(),
      reply: { ok: true },
      record: { state: 'RELEASED', attempt: 1 },
      ttl: 'retention',
    },
    {
      transition:
        'IN_PROGRESS, taken over (counted) from a lapsed handler —release(token, neverStarted, abandoned)→ next claim ACQUIRED_STALE, same attempt',
      given: (k) =>
        k
          .claimAndExpire()
          .then(() => k.claim())
          .then(() => k.releaseNeverStarted(k.token, true)),
      when: (k) => k.claim(),
      reply: { outcome: 'ACQUIRED_STALE', fencingToken: T(3), attempt: 2, started: true },
      record: { state: 'IN_PROGRESS', attempt: 2, abandoned: false },
      ttl: 'lease+retention',
    },
    {
      transition: "IN_PROGRESS —release(someone else's token, neverStarted)→ LEASE_LOST: the attempt stays",
      given: (k) => k.claimAndExpire().then(() => k.claim()),
      when: (k) => k.releaseNeverStarted(k.tokens[0]),
      reply: { ok: false, reason: 'LEASE_LOST', currentFencingToken: T(2), state: 'IN_PROGRESS' },
      record: 'unchanged',
    },
    {
      transition: 'IN_PROGRESS reserved, re-claimed after expiry —start(old token)→ LEASE_LOST, nothing runs',
      given: async (k) => {
        await k.claim({ reserve: true, leaseMs: settings.shortLeaseMs });
        await k.expireLease();
        await k.claim({ reserve: true });
      },
      when: (k) => k.start(k.tokens[0]),
      reply: { ok: false, reason: 'LEASE_LOST', currentFencingToken: T(2), state: 'IN_PROGRESS' },
      record: { attempt: 0, reserved: true },
    },
    // ── the stalled holder at the last attempt ────────────────────────────────────────────────────────
    {
      transition:
        "FAILED because the last lease lapsed —complete(that holder's token)→ COMPLETED: it ran once, its result counts",
      given: async (k) => {
        await k.claimAndExpire({ maxAttempts: 1 });
        await k.claim({ maxAttempts: 1 });
      },
      when: (k) => k.complete(k.tokens[0]),
      reply: { ok: true },
      record: {
        state: 'COMPLETED',
        fencingToken: T(1),
        attempt: 1,
        result: 'j"result"',
        error: undefined,
        lapsed: false,
      },
      ttl: 'retention',
    },
    {
      transition:
        'FAILED because the last lease lapsed —release/extend(token)→ LEASE_LOST: only complete is let through',
      given: async (k) => {
        await k.claimAndExpire({ maxAttempts: 1 });
        await k.claim({ maxAttempts: 1 });
      },
      when: async (k) => {
        expect(await k.extend(k.tokens[0])).toMatchObject({ ok: false, state: 'FAILED' });
        return k.release(k.tokens[0]);
      },
      reply: { ok: false, reason: 'LEASE_LOST', currentFencingToken: T(1), state: 'FAILED' },
      record: 'unchanged',
    },
    {
      transition:
        "FAILED because the last lease lapsed, dead-lettered —complete(that holder's token)→ COMPLETED, the mark cleared",
      given: async (k) => {
        await k.claimAndExpire({ maxAttempts: 1 });
        await k.claim({ maxAttempts: 1 });
        expect(await k.markDeadLettered(k.tokens[0])).toMatchObject({ ok: true, first: true });
      },
      when: (k) => k.complete(k.tokens[0]),
      reply: { ok: true },
      record: { state: 'COMPLETED', fencingToken: T(1), deadLettered: false, error: undefined },
      ttl: 'retention',
    },
    // ── dead-lettered once ────────────────────────────────────────────────────────────────────────────
    {
      transition: 'FAILED —markDeadLettered(token)→ OK first; the next claim reports deadLettered',
      given: failed,
      when: async (k) => {
        expect(await k.markDeadLettered()).toEqual({ ok: true, first: true });
        return k.claim();
      },
      reply: { outcome: 'FAILED', fencingToken: T(1), deadLettered: true },
      record: { state: 'FAILED', deadLettered: true },
      ttl: 'retention',
    },
    {
      transition: 'FAILED and marked —markDeadLettered(token)→ OK, first false (idempotent)',
      given: (k) => failed(k).then(() => k.markDeadLettered()),
      when: (k) => k.markDeadLettered(),
      reply: { ok: true, first: false },
      record: 'unchanged',
    },
    {
      transition: 'IN_PROGRESS —markDeadLettered(token)→ LEASE_LOST: only a FAILED record is marked',
      given: (k) => k.claim(),
      when: (k) => k.markDeadLettered(),
      reply: { ok: false, reason: 'LEASE_LOST', currentFencingToken: T(1), state: 'IN_PROGRESS' },
      record: 'unchanged',
    },
    {
      transition: 'FAILED —markDeadLettered(another token)→ LEASE_LOST',
      given: failed,
      when: (k) => k.markDeadLettered(k.token + 1),
      reply: { ok: false, reason: 'LEASE_LOST', currentFencingToken: T(1), state: 'FAILED' },
      record: 'unchanged',
    },
  ];

  for (const s of ALL_STATES) {
    rows.push({
      transition: `${s.name} —claim with another fingerprint→ PAYLOAD_MISMATCH (${s.state}), nothing changed`,
      given: s.given,
      when: (k) => k.claim({ fingerprint: FP_B }),
      reply: { outcome: 'PAYLOAD_MISMATCH', state: s.state, fencingToken: T(1), attempt: 1 },
      record: 'unchanged',
    });
  }

  for (const op of ['complete', 'release', 'fail', 'extend', 'start'] as const) {
    for (const f of FENCING_STATES) {
      rows.push({
        transition: `${f.name} —${op}(wrong token)→ LEASE_LOST, nothing changed`,
        given: f.given,
        when: (k) => k.write(op, f.token(k)),
        reply: {
          ok: false,
          reason: 'LEASE_LOST',
          currentFencingToken: f.currentFencingToken,
          state: f.state,
        },
        record: f.state === null ? null : 'unchanged',
      });
    }
  }
  return rows;
}

/** Checks a TTL: at most `expected`, and not more than the slack below it. */
export function expectTtl(ttlMs: number, expectedMs: number, slackMs: number): void {
  expect(ttlMs).toBeLessThanOrEqual(expectedMs);
  expect(ttlMs).toBeGreaterThanOrEqual(expectedMs - slackMs);
}

function withoutTtl(rec: IdempotencyRecord | null): Omit<IdempotencyRecord, 'ttlMs'> | null {
  if (!rec) return null;
  const { ttlMs: _ttl, ...rest } = rec;
  return rest;
}

/** Runs one row on a fresh key. */
export async function runContractRow(
  row: ContractRow,
  target: ContractTarget,
  settings: ContractSettings,
  key: string,
): Promise<void> {
  const k = new ContractKit(target, { scope: settings.scope, key }, settings);
  await row.given?.(k);
  const before = await k.get();
  const reply = await row.when(k);
  if (typeof row.reply === 'function') await row.reply(reply, k);
  else expect(reply).toMatchObject(k.resolve(row.reply));
  // Every token issued for the key is greater than every token issued before it, also across a loss.
  for (let i = 1; i < k.tokens.length; i++) expect(k.tokens[i]).toBeGreaterThan(k.tokens[i - 1]!);
  for (const t of k.tokens) expect(Number.isSafeInteger(t)).toBe(true);
  const after = await k.get();
  if (row.record === 'unchanged') {
    expect(withoutTtl(after)).toEqual(withoutTtl(before));
    if (before && after && before.ttlMs >= 0) expect(after.ttlMs).toBeLessThanOrEqual(before.ttlMs);
  } else if (row.record === null) {
    expect(after).toBeNull();
  } else {
    expect(after).toMatchObject(k.resolve(row.record));
  }
  if (row.ttl) {
    expect(after).not.toBeNull();
    const expected = row.ttl === 'retention' ? RETENTION_MS : k.leaseMs + RETENTION_MS;
    expectTtl(after!.ttlMs, expected, settings.ttlSlackMs);
  }
}

/**
 * Declares the whole contract as Jest tests: every row, then `claimMany` and argument checks.
 * `target` is called inside the tests (after `beforeAll` has built the store).
 */
export function describeStoreContract(
  title: string,
  target: () => ContractTarget,
  settings: () => ContractSettings,
): void {
  describe(title, () => {
    const rows = contractRows({ shortLeaseMs: 0, shortRetentionMs: 0, ttlSlackMs: 0, scope: '' });
    it.each(rows.map((row, i) => [row.transition, i] as const))('%s', async (_, i) => {
      const s = settings();
      await runContractRow(contractRows(s)[i]!, target(), s, `row-${i}`);
    });

    it('claimMany: replies in request order, each claim atomic on its own, across many keys', async () => {
      const s = settings();
      const { store } = target();
      const ids = Array.from({ length: 40 }, (_, i) => ({ scope: s.scope, key: `many-${i}` }));
      const options = { leaseMs: LONG_LEASE_MS, retentionMs: RETENTION_MS, fingerprint: FP_A };
      // Put every third key in COMPLETED and every third + 1 in IN_PROGRESS first.
      const held = new Map<number, number>();
      for (const [i, id] of ids.entries()) {
        if (i % 3 === 2) continue;
        const r = await store.claim(id, options);
        held.set(i, r.fencingToken);
        if (i % 3 === 0 && r.outcome === 'ACQUIRED') {
          await store.complete(id, r.fencingToken, { retentionMs: RETENTION_MS, result: `j${i}` });
        }
      }
      const replies = await store.claimMany(ids.map((id) => ({ id, options })));
      expect(replies).toHaveLength(ids.length);
      for (const [i, reply] of replies.entries()) {
        if (i % 3 === 0) expect(reply).toMatchObject({ outcome: 'DUPLICATE', result: `j${i}` });
        else if (i % 3 === 1) {
          expect(reply).toMatchObject({ outcome: 'CONFLICT', fencingToken: held.get(i) });
        } else expect(reply).toMatchObject({ outcome: 'ACQUIRED', attempt: 1, started: true });
      }
      await expect(store.claimMany([])).resolves.toEqual([]);
    });

    it('claimMany: a bad request rejects the batch before any key is claimed', async () => {
      const s = settings();
      const { store } = target();
      const good = { scope: s.scope, key: 'batch-good' };
      const options = { leaseMs: LONG_LEASE_MS, retentionMs: RETENTION_MS };
      await expect(
        store.claimMany([
          { id: good, options },
          { id: { scope: s.scope, key: '' }, options },
        ]),
      ).rejects.toMatchObject({ code: 'INVALID_IDEMPOTENCY_KEY' });
      await expect(
        store.claimMany([
          { id: good, options },
          { id: good, options: { ...options, leaseMs: 0 } },
        ]),
      ).rejects.toMatchObject({ code: 'INVALID_OPTION' });
      expect(await store.get(good)).toBeNull();
    });

    it.each<[string, (st: IdempotencyStore, id: RecordId) => Promise<unknown>]>([
      ['claim leaseMs 0', (st, id) => st.claim(id, { leaseMs: 0, retentionMs: 1 })],
      ['claim retentionMs 1.5', (st, id) => st.claim(id, { leaseMs: 1, retentionMs: 1.5 })],
      ['claim maxAttempts -1', (st, id) => st.claim(id, { leaseMs: 1, retentionMs: 1, maxAttempts: -1 })],
      ['complete token 0', (st, id) => st.complete(id, 0, { retentionMs: 1 })],
      ['release retentionMs 0', (st, id) => st.release(id, 1, { retentionMs: 0 })],
      ['fail token NaN', (st, id) => st.fail(id, Number.NaN, { retentionMs: 1, error: 'x' })],
      ['extend leaseMs -5', (st, id) => st.extend(id, 1, { leaseMs: -5, retentionMs: 1 })],
      // Its end (clock + lease) would not be an exact integer: Redis wrote the claim, then its reply was
      // refused as unexpected, and the key stayed IN_PROGRESS for the lease (285,000 years).
      [
        'claim leaseMs 2^53 - 1',
        (st, id) => st.claim(id, { leaseMs: Number.MAX_SAFE_INTEGER, retentionMs: 1 }),
      ],
      ['extend leaseMs 2^52 + 1', (st, id) => st.extend(id, 1, { leaseMs: 2 ** 52 + 1, retentionMs: 1 })],
      [
        'start leaseMs 2^53 - 1',
        (st, id) => st.start(id, 1, { leaseMs: Number.MAX_SAFE_INTEGER, retentionMs: 1 }),
      ],
    ])('rejects %s with INVALID_OPTION and changes nothing', async (_, call) => {
      const s = settings();
      const { store } = target();
      const id = { scope: s.scope, key: 'bad-args' };
      await expect(call(store, id)).rejects.toMatchObject({ code: 'INVALID_OPTION', retryable: false });
      expect(await store.get(id)).toBeNull();
    });

    it.each([
      ['an empty key', { scope: 'x', key: '' }],
      ['an empty scope', { scope: '', key: 'x' }],
      ['a key over 512 bytes', { scope: 'x', key: 'é'.repeat(257) }],
      ['a lone surrogate', { scope: 'x', key: '\uD800' }],
    ])('rejects %s with INVALID_IDEMPOTENCY_KEY', async (_, id) => {
      const { store } = target();
      await expect(store.claim(id, { leaseMs: 1, retentionMs: 1 })).rejects.toMatchObject({
        code: 'INVALID_IDEMPOTENCY_KEY',
      });
      await expect(store.get(id)).rejects.toMatchObject({ code: 'INVALID_IDEMPOTENCY_KEY' });
    });

    describe('waitForOutcome: a bounded wait for the holder of a live lease', () => {
      const options = { leaseMs: LONG_LEASE_MS, retentionMs: RETENTION_MS, fingerprint: FP_A };
      const retention = { retentionMs: RETENTION_MS };
      afterAll(() => target().close?.());

      /** Claims `key`, starts a wait on it, and runs `outcome` once the wait is under way. */
      async function waitAround(key: string, outcome: (id: RecordId, token: number) => Promise<unknown>) {
        const { store } = target();
        const id = { scope: settings().scope, key };
        const held = await store.claim(id, options);
        expect(held.outcome).toBe('ACQUIRED');
        const startedAt = Date.now();
        const waiting = store.waitForOutcome(id, options, { timeoutMs: 20_000 });
        // Let the wait subscribe and make its first claim, then reach the outcome.
        await new Promise((r) => setTimeout(r, 150));
        const outcomeAt = Date.now();
        await outcome(id, held.fencingToken);
        const reply = await waiting;
        return { reply, held, id, afterOutcomeMs: Date.now() - outcomeAt, totalMs: Date.now() - startedAt };
      }

      it('the holder completes: DUPLICATE with its stored result, long before the bound', async () => {
        const { store } = target();
        const w = await waitAround('wait-complete', (id, token) =>
          store.complete(id, token, { ...retention, result: 'j"paid"' }),
        );
        expect(w.reply).toMatchObject({
          outcome: 'DUPLICATE',
          result: 'j"paid"',
          fencingToken: w.held.fencingToken,
        });
        expect(w.totalMs).toBeLessThan(10_000);
        process.stderr.write(`[waitForOutcome] ${title}: complete → DUPLICATE in ${w.afterOutcomeMs} ms\n`);
      });

      it('the holder releases: the waiter claims (ACQUIRED, a greater token, the next attempt)', async () => {
        const { store } = target();
        const w = await waitAround('wait-release', (id, token) => store.release(id, token, retention));
        expect(w.reply).toMatchObject({ outcome: 'ACQUIRED', attempt: 2, started: true });
        expect(w.reply.fencingToken).toBeGreaterThan(w.held.fencingToken);
        expect(await store.get(w.id)).toMatchObject({
          state: 'IN_PROGRESS',
          fencingToken: w.reply.fencingToken,
        });
      });

      it('the holder fails: FAILED with its error', async () => {
        const { store } = target();
        const w = await waitAround('wait-fail', (id, token) =>
          store.fail(id, token, { ...retention, error: 'Error: declined' }),
        );
        expect(w.reply).toMatchObject({ outcome: 'FAILED', error: 'Error: declined', deadLettered: false });
        expect(w.totalMs).toBeLessThan(10_000);
      });

      it('twenty waiters on one key: one complete answers them all', async () => {
        const { store } = target();
        const id = { scope: settings().scope, key: 'wait-many' };
        const held = await store.claim(id, options);
        const waits = Array.from({ length: 20 }, () =>
          store.waitForOutcome(id, options, { timeoutMs: 20_000 }),
        );
        await new Promise((r) => setTimeout(r, 150));
        await store.complete(id, held.fencingToken, { ...retention, result: 'j1' });
        const replies = await Promise.all(waits);
        expect(replies.map((r) => r.outcome)).toEqual(replies.map(() => 'DUPLICATE'));
      });

      it('no outcome within the bound: CONFLICT, after the bound', async () => {
        const { store } = target();
        const id = { scope: settings().scope, key: 'wait-bound' };
        await store.claim(id, options);
        const startedAt = Date.now();
        const reply = await store.waitForOutcome(id, options, { timeoutMs: 300 });
        expect(reply).toMatchObject({ outcome: 'CONFLICT' });
        expect(Date.now() - startedAt).toBeGreaterThanOrEqual(290);
      });

      it('an aborted signal ends the wait with CONFLICT', async () => {
        const { store } = target();
        const id = { scope: settings().scope, key: 'wait-abort' };
        await store.claim(id, options);
        const controller = new AbortController();
        const waiting = store.waitForOutcome(id, options, { timeoutMs: 20_000, signal: controller.signal });
        setTimeout(() => controller.abort(), 100);
        const startedAt = Date.now();
        expect(await waiting).toMatchObject({ outcome: 'CONFLICT' });
        expect(Date.now() - startedAt).toBeLessThan(10_000);
      });

      it("the holder's lease lapses during the wait: ACQUIRED_STALE", async () => {
        const s = settings();
        const { store } = target();
        const id = { scope: s.scope, key: 'wait-lapse' };
        await store.claim(id, { ...options, leaseMs: Math.max(s.shortLeaseMs, 1) });
        const wait = store.waitForOutcome(id, options, { timeoutMs: 20_000 });
        await target().clock.passTime((await store.get(id))!.leaseExpiresAtMs!);
        expect(await wait).toMatchObject({ outcome: 'ACQUIRED_STALE', attempt: 2 });
      });

      it('no holder: answers at once (ACQUIRED; COMPLETED → DUPLICATE); a bad bound is INVALID_OPTION', async () => {
        const { store } = target();
        const id = { scope: settings().scope, key: 'wait-none' };
        const first = await store.waitForOutcome(id, options, { timeoutMs: 20_000 });
        expect(first).toMatchObject({ outcome: 'ACQUIRED', attempt: 1 });
        await store.complete(id, first.fencingToken, retention);
        expect(await store.waitForOutcome(id, options, { timeoutMs: 0 })).toMatchObject({
          outcome: 'DUPLICATE',
        });
        await expect(store.waitForOutcome(id, options, { timeoutMs: -1 })).rejects.toMatchObject({
          code: 'INVALID_OPTION',
        });
      });
    });

    it('get returns null for a key never claimed', async () => {
      const s = settings();
      expect(await target().store.get({ scope: s.scope, key: 'never' })).toBeNull();
    });
  });
}
