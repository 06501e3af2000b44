/**
 * The store contract: one table row per transition of DESIGN.md's state diagram (plus fencing and
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
  RecordId,
  RecordState,
  WriteReply,
} from '@idempotent-consumer/core';

/** The store's clock, as a contract run sees it. */
export interface ContractClock {
  /** The store's clock now, in ms since the epoch (Redis: `TIME`; memory: the injected clock). */
  now(): Promise<number>;
  /** Resolves once the store's clock is past `atMs` (Redis: polls `TIME`; memory: moves the fake clock). */
  passTime(atMs: number): Promise<void>;
}

/** One store under test. */
export interface ContractTarget {
  readonly store: IdempotencyStore;
  readonly clock: ContractClock;
}

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
/** Fingerprint of the payload most rows use. */
export const FP_A = 'a'.repeat(64);
/** Another payload's fingerprint. */
export const FP_B = 'b'.repeat(64);

type Write = 'complete' | 'release' | 'fail' | 'extend';
type AnyReply = ClaimReply | WriteReply | ExtendReply;

/** Drives one record through a row: remembers the last token and lease, waits on the store's clock. */
export class ContractKit {
  /** Token of the last successful claim (0 before any). */
  token = 0;
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

  /** Completes with the result `j"result"`; `result: null` completes without one. */
  complete(token = this.token, result: string | null = 'j"result"', retentionMs = RETENTION_MS) {
    return this.store.complete(this.id, token, { retentionMs, result: result ?? undefined });
  }

  release(token = this.token, retentionMs = RETENTION_MS) {
    return this.store.release(this.id, token, { retentionMs });
  }

  fail(token = this.token, retentionMs = RETENTION_MS) {
    return this.store.fail(this.id, token, { retentionMs, error: 'Error: boom' });
  }

  async extend(token = this.token, leaseMs = LONG_LEASE_MS) {
    const reply = await this.store.extend(this.id, token, { leaseMs, retentionMs: RETENTION_MS });
    if (reply.ok) this.leaseMs = leaseMs;
    return reply;
  }

  /** Any fenced write by name, with the given token. */
  write(op: Write, token: number): Promise<WriteReply | ExtendReply> {
    return this[op](token);
  }

  get(): Promise<IdempotencyRecord | null> {
    return this.store.get(this.id);
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

/** Starting states of the fencing rows, with the token they present and the reply they expect. */
const FENCING_STATES: {
  name: string;
  given: (k: ContractKit) => Promise<unknown>;
  token: (k: ContractKit) => number;
  currentFencingToken: number;
  state: RecordState | null;
}[] = [
  {
    name: 'IN_PROGRESS, re-claimed by another worker after its lease expired (the old token)',
    given: reclaimed,
    token: (k) => k.token - 1,
    currentFencingToken: 2,
    state: 'IN_PROGRESS',
  },
  {
    name: 'IN_PROGRESS, a token from the future',
    given: (k) => k.claim(),
    token: (k) => k.token + 1,
    currentFencingToken: 1,
    state: 'IN_PROGRESS',
  },
  {
    name: 'COMPLETED (the token that completed it)',
    given: completed,
    token: (k) => k.token,
    currentFencingToken: 1,
    state: 'COMPLETED',
  },
  {
    name: 'RELEASED (the token that released it)',
    given: released,
    token: (k) => k.token,
    currentFencingToken: 1,
    state: 'RELEASED',
  },
  {
    name: 'FAILED (the token that failed it)',
    given: failed,
    token: (k) => k.token,
    currentFencingToken: 1,
    state: 'FAILED',
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
      reply: (r) => {
        expect(r).toMatchObject({ outcome: 'ACQUIRED', fencingToken: 1, attempt: 1 });
        const a = r as AcquiredReply;
        expect(a.leaseExpiresAtMs - a.serverTimeMs).toBe(LONG_LEASE_MS);
      },
      record: { state: 'IN_PROGRESS', fencingToken: 1, attempt: 1, fingerprint: FP_A, result: undefined },
      ttl: 'lease+retention',
    },
    {
      transition: 'IN_PROGRESS (live lease) —claim→ IN_PROGRESS: CONFLICT with the remaining lease',
      given: (k) => k.claim(),
      when: (k) => k.claim(),
      reply: (r) => {
        expect(r).toMatchObject({ outcome: 'CONFLICT', fencingToken: 1, attempt: 1 });
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
      reply: { outcome: 'ACQUIRED_STALE', fencingToken: 2, attempt: 2 },
      record: { state: 'IN_PROGRESS', fencingToken: 2, attempt: 2, fingerprint: FP_A },
      ttl: 'lease+retention',
    },
    {
      transition: 'IN_PROGRESS (lease expired) at maxAttempts —claim→ FAILED: ATTEMPTS_EXHAUSTED, lost lease',
      given: (k) => k.claimAndExpire({ maxAttempts: 1 }),
      when: (k) => k.claim({ maxAttempts: 1 }),
      reply: (r) => {
        expect(r).toMatchObject({ outcome: 'FAILED', fencingToken: 1, attempt: 1 });
        expect((r as { error: string }).error).toMatch(/^ATTEMPTS_EXHAUSTED: 1 of 1 .*lost its lease/);
      },
      record: { state: 'FAILED', fencingToken: 1, attempt: 1, leaseExpiresAtMs: undefined },
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
        fencingToken: 1,
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
      record: { state: 'COMPLETED', fencingToken: 1, result: 'j"result"' },
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
          fencingToken: 1,
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
      transition: 'COMPLETED —(retention lapses)→ (none): the next claim is attempt 1, token 1',
      given: (k) =>
        k
          .claim()
          .then(() => k.complete(k.token, 'j1', settings.shortRetentionMs))
          .then(() => k.forget()),
      when: (k) => k.claim(),
      reply: { outcome: 'ACQUIRED', fencingToken: 1, attempt: 1 },
      record: { state: 'IN_PROGRESS', fencingToken: 1, attempt: 1 },
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
        fencingToken: 1,
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
      reply: { outcome: 'ACQUIRED', fencingToken: 2, attempt: 2 },
      record: { state: 'IN_PROGRESS', fencingToken: 2, attempt: 2 },
      ttl: 'lease+retention',
    },
    {
      transition: 'RELEASED below maxAttempts —claim→ IN_PROGRESS: ACQUIRED, attempt = maxAttempts',
      given: (k) => k.claim({ maxAttempts: 2 }).then(() => k.release()),
      when: (k) => k.claim({ maxAttempts: 2 }),
      reply: { outcome: 'ACQUIRED', fencingToken: 2, attempt: 2 },
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
      reply: (r) => {
        expect(r).toMatchObject({ outcome: 'FAILED', fencingToken: 2, attempt: 2 });
        expect((r as { error: string }).error).toBe('ATTEMPTS_EXHAUSTED: 2 of 2 attempts used');
      },
      record: {
        state: 'FAILED',
        fencingToken: 2,
        attempt: 2,
        error: 'ATTEMPTS_EXHAUSTED: 2 of 2 attempts used',
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
      reply: { outcome: 'ACQUIRED', fencingToken: 6, attempt: 6 },
      record: { state: 'IN_PROGRESS', attempt: 6 },
      ttl: 'lease+retention',
    },
    {
      transition: 'RELEASED —(retention lapses)→ (none): attempts are forgotten',
      given: (k) =>
        k
          .claim()
          .then(() => k.release(k.token, settings.shortRetentionMs))
          .then(() => k.forget()),
      when: (k) => k.claim(),
      reply: { outcome: 'ACQUIRED', fencingToken: 1, attempt: 1 },
      record: { state: 'IN_PROGRESS', attempt: 1 },
      ttl: 'lease+retention',
    },
    // ── fail ───────────────────────────────────────────────────────────────────────────────────────────
    {
      transition: 'IN_PROGRESS —fail(token, error)→ FAILED (terminal): OK, TTL = retention',
      given: (k) => k.claim(),
      when: (k) => k.fail(),
      reply: { ok: true },
      record: { state: 'FAILED', fencingToken: 1, error: 'Error: boom', leaseExpiresAtMs: undefined },
      ttl: 'retention',
    },
    {
      transition: 'FAILED —claim→ FAILED: the recorded error, nothing changed',
      given: failed,
      when: (k) => k.claim(),
      reply: { outcome: 'FAILED', fencingToken: 1, attempt: 1, error: 'Error: boom' },
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
      reply: { outcome: 'ACQUIRED', fencingToken: 1, attempt: 1 },
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
      record: { state: 'IN_PROGRESS', fencingToken: 1, attempt: 1 },
      ttl: 'lease+retention',
    },
    {
      transition: 'IN_PROGRESS (lease expired, nobody re-claimed) —extend(token)→ IN_PROGRESS, live again',
      given: (k) => k.claimAndExpire(),
      when: (k) => k.extend(),
      reply: { ok: true },
      record: { state: 'IN_PROGRESS', fencingToken: 1 },
      ttl: 'lease+retention',
    },
    {
      transition: 'IN_PROGRESS (extended) —claim→ CONFLICT: the extension holds off other claimers',
      given: (k) => k.claimAndExpire().then(() => k.extend()),
      when: (k) => k.claim(),
      reply: { outcome: 'CONFLICT', fencingToken: 1 },
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
      reply: { outcome: 'ACQUIRED', fencingToken: 2 },
      record: { state: 'IN_PROGRESS', fingerprint: FP_B },
      ttl: 'lease+retention',
    },
  ];

  for (const s of ALL_STATES) {
    rows.push({
      transition: `${s.name} —claim with another fingerprint→ PAYLOAD_MISMATCH (${s.state}), nothing changed`,
      given: s.given,
      when: (k) => k.claim({ fingerprint: FP_B }),
      reply: { outcome: 'PAYLOAD_MISMATCH', state: s.state, fencingToken: 1, attempt: 1 },
      record: 'unchanged',
    });
  }

  for (const op of ['complete', 'release', 'fail', 'extend'] as const) {
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
  else expect(reply).toMatchObject(row.reply);
  const after = await k.get();
  if (row.record === 'unchanged') {
    expect(withoutTtl(after)).toEqual(withoutTtl(before));
    if (before && after && before.ttlMs >= 0) expect(after.ttlMs).toBeLessThanOrEqual(before.ttlMs);
  } else if (row.record === null) {
    expect(after).toBeNull();
  } else {
    expect(after).toMatchObject(row.record);
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
      for (const [i, id] of ids.entries()) {
        if (i % 3 === 2) continue;
        const r = await store.claim(id, options);
        if (i % 3 === 0 && r.outcome === 'ACQUIRED') {
          await store.complete(id, r.fencingToken, { retentionMs: RETENTION_MS, result: `j${i}` });
        }
      }
      const replies = await store.claimMany(ids.map((id) => ({ id, options })));
      expect(replies).toHaveLength(ids.length);
      for (const [i, reply] of replies.entries()) {
        if (i % 3 === 0) expect(reply).toMatchObject({ outcome: 'DUPLICATE', result: `j${i}` });
        else if (i % 3 === 1) expect(reply).toMatchObject({ outcome: 'CONFLICT', fencingToken: 1 });
        else expect(reply).toMatchObject({ outcome: 'ACQUIRED', fencingToken: 1, attempt: 1 });
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

    it('get returns null for a key never claimed', async () => {
      const s = settings();
      expect(await target().store.get({ scope: s.scope, key: 'never' })).toBeNull();
    });
  });
}
