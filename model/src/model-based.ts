/**
 * Model-based tests of a store against the model (record-model.ts): fast-check draws sequences of
 * commands on one key, three workers' claims and writes, with lost replies (a claim whose token its worker
 * never learns), late commands (a write with a token of an earlier claim), crashes, leases lapsing, the
 * record lost and, where the store has them, the operator's release and purge; the model is the oracle
 * for every reply and every field of the record after it. A disagreement prints the sequence.
 */
import type {
  AdminPurgeReply,
  AdminReleaseReply,
  IdempotencyRecord,
  IdempotencyStore,
  RecordId,
  RecordState,
} from '@idempotent-consumer/core';
import fc from 'fast-check';
import { RecordModel } from './record-model';

export const LEASE_MS = 60_000;
export const RETENTION_MS = 86_400_000;
const FINGERPRINTS = ['', 'a'.repeat(64), 'b'.repeat(64)] as const;
const WORKERS = 3;

/** One store under test, on one key of its own. */
export interface ModelTarget {
  readonly store: IdempotencyStore;
  readonly id: RecordId;
  /** The store's clock, in ms since the epoch (Redis: TIME). */
  now(): Promise<number>;
  /** Every lease of the key lapses: the store's clock passes it. */
  lapse(): Promise<void>;
  /** The record is lost (Redis: DEL; memory: its clock passes the record's TTL). */
  lose(): Promise<void>;
  /** The operator's scripts, where the store has them (Redis). */
  readonly admin?: {
    release(
      expectedFencingToken: number,
      expectedState?: 'IN_PROGRESS' | 'FAILED',
    ): Promise<AdminReleaseReply>;
    purge(states: readonly RecordState[]): Promise<AdminPurgeReply>;
  };
}

/** The model, the workers' claims, and the real tokens by the order they were issued. */
interface World {
  readonly model: RecordModel;
  /** Worker -> the model token of the claim it holds (0: none). */
  readonly holders: number[];
  /** Model token n -> the store's token (index n - 1). */
  readonly tokens: number[];
  readonly steps: string[];
}

/** A token to present: a worker's claim, an earlier claim's (a late command), or one never issued. */
type TokenSource = { worker: number } | { earlier: number } | 'unknown';

function tokenOf(world: World, source: TokenSource): number {
  if (source === 'unknown') return 0;
  if ('worker' in source) return world.holders[source.worker] ?? 0;
  return world.tokens.length === 0 ? 0 : (source.earlier % world.tokens.length) + 1;
}

/** The store's token for a model token; one never issued is one no claim returned. */
function realToken(world: World, token: number): number {
  return token === 0 ? 12_345 : world.tokens[token - 1]!;
}

/** A store token as the model names it: the order it was issued in, 0 for none. */
function modelToken(world: World, real: number): number | string {
  if (real === 0) return 0;
  const index = world.tokens.indexOf(real);
  return index < 0 ? `unknown token ${real}` : index + 1;
}

class Disagreement extends Error {}

/** JSON with the fields of objects in name order, so that only the values are compared. */
function canonical(value: unknown): string {
  return JSON.stringify(value, (_, v: unknown) =>
    v !== null && typeof v === 'object' && !Array.isArray(v)
      ? Object.fromEntries(Object.entries(v).sort(([a], [b]) => a.localeCompare(b)))
      : v,
  );
}

function agree(world: World, what: string, actual: unknown, expected: unknown): void {
  const a = canonical(actual);
  const e = canonical(expected);
  if (a !== e) {
    throw new Disagreement(
      `${what}: the store answered ${a}, the model ${e}\nsteps:\n  ${world.steps.join('\n  ')}`,
    );
  }
}

/** The store's reply with its tokens named by the model and its times checked and dropped. */
function normalized(world: World, reply: object): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [field, value] of Object.entries(reply)) {
    if (field === 'fencingToken' || field === 'currentFencingToken')
      out[field] = modelToken(world, value as number);
    else if (/Ms$/.test(field) || field === 'completedAtMs') continue;
    else out[field] = value;
  }
  return out;
}

/** Compares the record after a step with the model's. */
async function compareRecord(world: World, target: ModelTarget): Promise<void> {
  const real: IdempotencyRecord | null = await target.store.get(target.id);
  const rec = world.model.rec;
  if (real === null || rec === undefined) {
    agree(world, 'record', real === null ? null : 'a record', rec === undefined ? null : 'a record');
    return;
  }
  const live = real.leaseExpiresAtMs !== undefined && real.leaseExpiresAtMs > (await target.now());
  agree(
    world,
    'record',
    {
      state: real.state,
      fencingToken: modelToken(world, real.fencingToken),
      attempt: real.attempt,
      fingerprint: real.fingerprint,
      live,
      leaseSet: real.leaseExpiresAtMs !== undefined,
      result: real.result,
      error: real.error,
      reserved: real.reserved,
      lapsed: real.lapsed,
      deadLettered: real.deadLettered,
      abandoned: real.abandoned,
      ttl: real.ttlMs > 0 && real.ttlMs <= (real.state === 'IN_PROGRESS' ? LEASE_MS : 0) + RETENTION_MS,
    },
    {
      state: rec.s,
      fencingToken: rec.t,
      attempt: rec.a,
      fingerprint: rec.p,
      live: rec.live,
      leaseSet: rec.s === 'IN_PROGRESS',
      result: rec.s === 'COMPLETED' ? rec.r : undefined,
      error: rec.s === 'FAILED' ? rec.x : undefined,
      reserved: rec.s === 'IN_PROGRESS' && rec.v,
      lapsed: rec.s === 'FAILED' && rec.l,
      deadLettered: rec.s === 'FAILED' && rec.d,
      abandoned: rec.b,
      ttl: true,
    },
  );
}

type Command = fc.AsyncCommand<World, ModelTarget>;

/** A command: a description for the steps, and its run against the store and the model. */
function command(describe: string, run: (world: World, target: ModelTarget) => Promise<void>): Command {
  return {
    check: () => true,
    run: async (world, target) => {
      world.steps.push(describe);
      await run(world, target);
      await compareRecord(world, target);
    },
    toString: () => describe,
  };
}

const worker = fc.integer({ min: 0, max: WORKERS - 1 });
const tokenSource: fc.Arbitrary<TokenSource> = fc.oneof(
  { weight: 6, arbitrary: worker.map((w) => ({ worker: w })) },
  { weight: 2, arbitrary: fc.nat(20).map((n) => ({ earlier: n })) },
  { weight: 1, arbitrary: fc.constant('unknown' as const) },
);

const claim = fc
  .record({
    w: worker,
    reserve: fc.boolean(),
    fingerprint: fc.constantFrom(...FINGERPRINTS),
    maxAttempts: fc.integer({ min: 0, max: 3 }),
    // One claim in five loses its reply: its worker never learns the token.
    lost: fc.nat(4).map((n) => n === 0),
  })
  .map(({ w, reserve, fingerprint, maxAttempts, lost }) =>
    command(
      `w${w} claim${reserve ? ' (reserve)' : ''} fingerprint ${FINGERPRINTS.indexOf(fingerprint)} maxAttempts ${maxAttempts}${lost ? ', its reply lost' : ''}`,
      async (world, target) => {
        const issued = world.model.issued;
        const expected = world.model.claim(fingerprint, maxAttempts, reserve);
        const reply = await target.store.claim(target.id, {
          leaseMs: LEASE_MS,
          retentionMs: RETENTION_MS,
          fingerprint,
          maxAttempts,
          reserve,
        });
        if (
          world.model.issued > issued &&
          (reply.outcome === 'ACQUIRED' || reply.outcome === 'ACQUIRED_STALE')
        ) {
          // Tokens strictly increase for a key, also across the loss of its record.
          const previous = world.tokens[world.tokens.length - 1] ?? 0;
          agree(world, 'token order', reply.fencingToken > previous, true);
          world.tokens.push(reply.fencingToken);
          agree(world, 'lease', reply.leaseExpiresAtMs - reply.serverTimeMs, LEASE_MS);
        }
        if (reply.outcome === 'CONFLICT') {
          agree(
            world,
            'remaining lease',
            reply.remainingLeaseMs > 0 && reply.remainingLeaseMs <= LEASE_MS,
            true,
          );
        }
        agree(world, 'claim', normalized(world, reply), expected);
        if (!lost && (expected.outcome === 'ACQUIRED' || expected.outcome === 'ACQUIRED_STALE')) {
          world.holders[w] = expected.fencingToken;
        }
      },
    ),
  );

type Write =
  | { kind: 'start' | 'extend' | 'mark-dead-lettered' }
  | { kind: 'complete'; result: string | undefined }
  | { kind: 'release'; abandoned: boolean; neverStarted: boolean }
  | { kind: 'fail'; abandoned: boolean };

const write: fc.Arbitrary<Write> = fc.oneof(
  fc.constantFrom<Write>({ kind: 'start' }, { kind: 'extend' }, { kind: 'mark-dead-lettered' }),
  fc.constantFrom(undefined, 'j1', 'j"r"').map((result): Write => ({ kind: 'complete', result })),
  fc
    .record({ abandoned: fc.boolean(), neverStarted: fc.boolean() })
    .map((o): Write => ({ kind: 'release', ...o })),
  fc.boolean().map((abandoned): Write => ({ kind: 'fail', abandoned })),
);

const fenced = fc.record({ source: tokenSource, write }).map(({ source, write: w }) =>
  command(`${JSON.stringify(source)} ${JSON.stringify(w)}`, async (world, target) => {
    const token = tokenOf(world, source);
    const real = realToken(world, token);
    const { store, id } = target;
    const m = world.model;
    const lease = { leaseMs: LEASE_MS, retentionMs: RETENTION_MS };
    switch (w.kind) {
      case 'start': {
        const expected = m.start(token);
        agree(world, 'start', normalized(world, await store.start(id, real, lease)), expected);
        break;
      }
      case 'extend':
        agree(world, 'extend', normalized(world, await store.extend(id, real, lease)), m.extend(token));
        break;
      case 'mark-dead-lettered':
        agree(
          world,
          'mark',
          normalized(world, await store.markDeadLettered(id, real)),
          m.markDeadLettered(token),
        );
        break;
      case 'complete': {
        const expected = m.complete(token, w.result);
        const reply = await store.complete(id, real, { retentionMs: RETENTION_MS, result: w.result });
        agree(world, 'complete', normalized(world, reply), expected);
        break;
      }
      case 'release': {
        const expected = m.release(token, w.abandoned, w.neverStarted);
        const reply = await store.release(id, real, {
          retentionMs: RETENTION_MS,
          abandoned: w.abandoned,
          neverStarted: w.neverStarted,
        });
        agree(world, 'release', normalized(world, reply), expected);
        break;
      }
      case 'fail': {
        const expected = m.fail(token, 'E', w.abandoned);
        const reply = await store.fail(id, real, {
          retentionMs: RETENTION_MS,
          error: 'E',
          abandoned: w.abandoned,
        });
        agree(world, 'fail', normalized(world, reply), expected);
        break;
      }
    }
  }),
);

const crash = worker.map((w) =>
  command(`w${w} crashes`, async (world) => {
    world.holders[w] = 0;
  }),
);

const lapse = fc.constant(
  command('every lease lapses', async (world, target) => {
    world.model.lapse();
    await target.lapse();
  }),
);

const lose = fc.constant(
  command('the record is lost', async (world, target) => {
    world.model.lose();
    await target.lose();
  }),
);

const STATES: readonly RecordState[] = ['IN_PROGRESS', 'COMPLETED', 'RELEASED', 'FAILED'];

const adminRelease = fc
  .record({ token: fc.constantFrom('seen', 'any', 'other'), state: fc.constantFrom('seen', 'any', 'other') })
  .map(({ token, state }) =>
    command(`operator: admin-release expecting token ${token}, state ${state}`, async (world, target) => {
      const rec = world.model.rec;
      const t = token === 'any' || !rec ? 0 : token === 'seen' ? rec.t : rec.t + 1;
      // The expected state can only be IN_PROGRESS or FAILED (admin-release.lua).
      const held = rec?.s === 'IN_PROGRESS' || rec?.s === 'FAILED' ? rec.s : undefined;
      const s =
        state === 'any' || held === undefined
          ? undefined
          : state === 'seen'
            ? held
            : held === 'IN_PROGRESS'
              ? 'FAILED'
              : 'IN_PROGRESS';
      const expected = world.model.adminRelease(t, s);
      const real = t === 0 ? 0 : t <= world.tokens.length ? realToken(world, t) : 12_345;
      agree(world, 'admin-release', normalized(world, await target.admin!.release(real, s)), expected);
    }),
  );

const adminPurge = fc.subarray([...STATES]).map((states) =>
  command(`operator: admin-purge ${states.join(',') || 'any'}`, async (world, target) => {
    const expected = world.model.adminPurge(states);
    agree(world, 'admin-purge', normalized(world, await target.admin!.purge(states)), expected);
  }),
);

/** Every command, weighted; the operator's only with `admin`. */
export function commands(admin: boolean): fc.Arbitrary<Command>[] {
  const all = [claim, claim, claim, fenced, fenced, fenced, fenced, crash, lapse, lapse, lose];
  return admin ? [...all, adminRelease, adminPurge] : all;
}

/**
 * Runs `runs` sequences of up to `maxCommands` commands, each on a target of its own (`newTarget`);
 * rejects with the first disagreement (shrunk by fast-check) and its steps.
 */
export async function runModelBased(options: {
  newTarget: (sequence: number) => Promise<ModelTarget>;
  runs: number;
  maxCommands?: number;
  admin: boolean;
  seed?: number;
}): Promise<void> {
  let sequence = 0;
  await fc.assert(
    fc.asyncProperty(
      fc.commands(commands(options.admin), { maxCommands: options.maxCommands ?? 40, size: 'max' }),
      async (cmds) => {
        sequence += 1;
        const target = await options.newTarget(sequence);
        const world: World = {
          model: new RecordModel(),
          holders: Array(WORKERS).fill(0),
          tokens: [],
          steps: [],
        };
        await fc.asyncModelRun(() => ({ model: world, real: target }), cmds);
      },
    ),
    { numRuns: options.runs, seed: options.seed, endOnFailure: false },
  );
}
