import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import {
  buildRecordKey,
  Idempotency,
  NonRetryableError,
  RedisIdempotencyAdmin,
  RedisIdempotencyStore,
} from '@idempotent-consumer/core';
import Redis from 'ioredis';
import { describeWithServices } from '../../support/service';
import { deleteByPrefix, uniquePrefix } from '../core/redis-target';
import { cli } from './run-cli';

const LEASE_MS = 600_000;
const scope = 'ab[c]*'; // glob characters: the SCAN pattern must escape them
const lookalike = 'abcxyz'; // as long as `scope`, and matched by it if it were not escaped

describeWithServices(['redis'], 'idempotent-consumer CLI on real Redis', ({ redis: url }) => {
  const prefix = uniquePrefix('cli');
  let redis: Redis;
  let store: RedisIdempotencyStore;
  let idempotency: Idempotency;
  /** The fencing token of the claim of 'held' (from the server clock in µs, see FencingToken). */
  let heldToken = 0;
  const run = (args: string[], answer?: string) => cli(url, ['--prefix', prefix, ...args], answer);

  beforeAll(async () => {
    redis = new Redis(url);
    store = new RedisIdempotencyStore({ redis }, { keyPrefix: prefix });
    idempotency = new Idempotency({ store }, { leaseMs: LEASE_MS, maxAttempts: 3 });
    await idempotency.run({ scope, key: 'done', payload: { n: 1 } }, () => ({
      receipt: 'r-1',
      text: 'x'.repeat(500),
    }));
    await idempotency.run({ scope, key: 'failed' }, () => {
      throw new NonRetryableError('card declined');
    });
    await idempotency.run({ scope, key: 'released' }, () => {
      throw new Error('timeout');
    });
    heldToken = (await store.claim({ scope, key: 'held' }, { leaseMs: LEASE_MS, retentionMs: 60_000 }))
      .fencingToken;
    await Promise.all(
      Array.from({ length: 1200 }, (_, i) => idempotency.run({ scope, key: `bulk-${i}` }, () => i)),
    );
    await idempotency.run({ scope: lookalike, key: 'k' }, () => 'other scope');
  }, 60_000);

  afterAll(async () => {
    await deleteByPrefix(redis, prefix);
    await redis.quit();
  });

  it('inspect: a COMPLETED record with its result preview, as JSON and as a table', async () => {
    const json = await run(['--json', 'inspect', scope, 'done', '--preview-chars', '40']);
    expect(json.status).toBe(0);
    expect(json.json()).toMatchObject({
      found: true,
      scope,
      key: 'done',
      state: 'COMPLETED',
      fencingToken: expect.any(Number),
      attempt: 1,
      leaseRemainingMs: null,
      errorPreview: null,
      resultPreview: expect.stringMatching(/^\{"receipt":"r-1","text":"x+… \(\d+ chars\)$/),
      // A completed record does not keep its creation time: null, not an empty string.
      createdAt: null,
      updatedAt: expect.stringMatching(/^\d{4}-\d\d-\d\dT/),
    });
    const human = await run(['inspect', scope, 'done']);
    expect(human.stdout).toMatch(/state\s+│ COMPLETED/);
    expect(human.stdout).toMatch(/created\s+│ \(not kept once completed\)/);
  });

  it('inspect: an IN_PROGRESS record shows the lease left on the server clock; FAILED shows its error', async () => {
    const held = (await run(['--json', 'inspect', scope, 'held'])).json<{ leaseRemainingMs: number }>();
    expect(held).toMatchObject({ state: 'IN_PROGRESS' });
    expect(held.leaseRemainingMs).toBeGreaterThan(0);
    expect(held.leaseRemainingMs).toBeLessThanOrEqual(LEASE_MS);
    const failed = (await run(['--json', 'inspect', scope, 'failed'])).json();
    expect(failed).toMatchObject({
      state: 'FAILED',
      errorPreview: 'NonRetryableError [NON_RETRYABLE]: card declined',
    });
    const missing = await run(['--json', 'inspect', scope, 'nope']);
    expect(missing.status).toBe(3);
    expect(missing.json()).toEqual({ scope, key: 'nope', found: false });
  });

  it('stats counts per state with SCAN, only the scope asked for', async () => {
    const stats = await run(['--json', 'stats', scope]);
    expect(stats.status).toBe(0);
    expect(stats.json()).toEqual({
      scope,
      total: 1204,
      states: { IN_PROGRESS: 1, COMPLETED: 1201, RELEASED: 1, FAILED: 1 },
      inProgressLapsed: 0,
    });
    // The table: the lapsed leases sit under IN_PROGRESS, as part of it, so the state rows add up to total.
    const human = await run(['stats', scope]);
    expect(human.stdout).toMatch(/│ IN_PROGRESS\s+│ 1\s+│\n│ {3}of which lease lapsed\s+│ 0 /);
  });

  it('list filters by state and stops at --limit', async () => {
    const failed = (await run(['--json', 'list', scope, '--state', 'failed,RELEASED'])).json<{
      records: { key: string }[];
    }>();
    expect(failed.records.map((r) => r.key).sort()).toEqual(['failed', 'released']);
    const limited = (await run(['--json', 'list', scope, '--limit', '5'])).json<{
      records: unknown[];
      truncated: boolean;
    }>();
    expect(limited.records).toHaveLength(5);
    expect(limited.truncated).toBe(true);
    const bad = await run(['list', scope, '--state', 'DONE']);
    expect(bad.status).toBe(2);
    expect(bad.stderr).toMatch(/unknown state "DONE"/);
  });

  it('release asks first: refused without a terminal or on "n", done on "y"; the holder is fenced off', async () => {
    const refused = await run(['release', scope, 'held']);
    expect(refused.status).toBe(2);
    expect(refused.stderr).toMatch(/pass --yes/);
    expect(await store.get({ scope, key: 'held' })).toMatchObject({
      state: 'IN_PROGRESS',
      fencingToken: heldToken,
    });
    const no = await run(['release', scope, 'held'], 'n\n');
    expect(no.status).toBe(2);
    expect(await store.get({ scope, key: 'held' })).toMatchObject({ state: 'IN_PROGRESS' });

    const yes = await run(['release', scope, 'held'], 'y\n');
    expect(yes.status).toBe(0);
    expect(yes.stderr).toMatch(/lease has \d+ ms left/);
    expect(yes.stdout).toMatch(
      new RegExp(
        `Released \\(was IN_PROGRESS, fencing token ${heldToken}; a worker's lease had \\d+ ms left`,
      ),
    );
    // The stuck worker's late write is refused; the next message runs the handler as attempt 1, told
    // that the stuck one may be partial or still running (ACQUIRED_STALE).
    expect(await store.complete({ scope, key: 'held' }, heldToken, { retentionMs: 60_000 })).toMatchObject({
      ok: false,
    });
    const next = await idempotency.run({ scope, key: 'held' }, () => 'ran again');
    expect(next).toMatchObject({ outcome: 'ACQUIRED_STALE', status: 'completed', attempt: 1 });
    expect((next as { fencingToken: number }).fencingToken).toBeGreaterThan(heldToken);
  });

  it('release --yes makes a FAILED record run again; a COMPLETED one is not released', async () => {
    const released = await run(['--json', '--yes', 'release', scope, 'failed']);
    expect(released.status).toBe(0);
    expect(released.json()).toMatchObject({ outcome: 'OK', previousState: 'FAILED' });
    expect(await idempotency.run({ scope, key: 'failed' }, () => 'paid')).toMatchObject({
      outcome: 'ACQUIRED',
      result: 'paid',
    });
    const completed = await run(['--json', '--yes', 'release', scope, 'done']);
    expect(completed.status).toBe(3);
    expect(completed.json()).toMatchObject({ outcome: 'NOT_RELEASABLE', state: 'COMPLETED' });
  });

  it('the admin scripts are fenced: a changed token, a non-record key and a held lease are left alone', async () => {
    const admin = new RedisIdempotencyAdmin({ redis }, { keyPrefix: prefix });
    const id = { scope, key: 'fenced' };
    const first = await store.claim(id, { leaseMs: LEASE_MS, retentionMs: 60_000 });
    await store.release(id, first.fencingToken, { retentionMs: 60_000 });
    const second = await store.claim(id, { leaseMs: LEASE_MS, retentionMs: 60_000 });
    expect(
      await admin.release(id, { retentionMs: 60_000, expectedFencingToken: first.fencingToken }),
    ).toEqual({
      outcome: 'TOKEN_CHANGED',
      state: 'IN_PROGRESS',
      fencingToken: second.fencingToken,
    });
    expect(await admin.purge(id)).toMatchObject({ outcome: 'LEASE_HELD', fencingToken: second.fencingToken });
    expect(await admin.purge(id, { states: ['COMPLETED'] })).toEqual({
      outcome: 'OTHER_STATE',
      state: 'IN_PROGRESS',
    });
    await redis.set(buildRecordKey(prefix, { scope, key: 'a-string' }), 'not a record');
    expect(await admin.purge({ scope, key: 'a-string' })).toEqual({
      outcome: 'NOT_A_RECORD',
      type: 'string',
    });
    await redis.del(buildRecordKey(prefix, { scope, key: 'a-string' }));
    await admin.release(id, { retentionMs: 60_000 });
  });

  it('admin-release and admin-purge leave a key that is not a record as it was (value and TTL): another type, or a hash without a state', async () => {
    const admin = new RedisIdempotencyAdmin({ redis }, { keyPrefix: prefix });
    const foreignScope = 'foreign';
    const id = (key: string) => ({ scope: foreignScope, key });
    const keyOf = (key: string) => buildRecordKey(prefix, id(key));
    await redis.set(keyOf('string'), 'not a record', 'PX', 600_000);
    await redis.rpush(keyOf('list'), 'a', 'b');
    await redis.sadd(keyOf('set'), 'a');
    await redis.zadd(keyOf('zset'), 1, 'a');
    await redis.xadd(keyOf('stream'), '*', 'f', 'v');
    // A hash of another program, even with a fencing-token-like field, but no state (`s`).
    await redis.hset(keyOf('hash'), 't', '5', 'e', '0', 'x', 'theirs');
    const types = ['string', 'list', 'set', 'zset', 'stream', 'hash'] as const;
    const snapshot = async () =>
      Promise.all(
        types.map(async (type) => ({
          type,
          dump: (await redis.dumpBuffer(keyOf(type)))?.toString('hex'),
          ttl: (await redis.pttl(keyOf(type))) > 0 ? 'some' : await redis.pttl(keyOf(type)),
        })),
      );
    const before = await snapshot();
    expect(before.every((s) => s.dump !== undefined)).toBe(true);
    for (const type of types) {
      for (const options of [
        { retentionMs: 1 },
        { retentionMs: 1, expectedFencingToken: 5, expectedState: 'IN_PROGRESS' as const },
        { retentionMs: 1, expectedFencingToken: 5, expectedState: 'FAILED' as const },
      ]) {
        const released = admin.release(id(type), options);
        if (type === 'hash') await expect(released).resolves.toEqual({ outcome: 'NOT_FOUND' });
        else await expect(released).rejects.toMatchObject({ code: 'UNEXPECTED_STORE_REPLY' });
      }
      for (const states of [[], ['IN_PROGRESS'], ['COMPLETED', 'RELEASED', 'FAILED']] as const) {
        expect(await admin.purge(id(type), { states })).toEqual({ outcome: 'NOT_A_RECORD', type });
      }
    }
    expect(await snapshot()).toEqual(before);
    await redis.del(...types.map(keyOf));
  });

  it('purge deletes the scope but keeps a held lease and other scopes', async () => {
    await store.claim({ scope, key: 'still-held' }, { leaseMs: LEASE_MS, retentionMs: 60_000 });
    const refused = await run(['purge', scope]);
    expect(refused.status).toBe(2);
    const onlyFailed = await run(['--json', '--yes', 'purge', scope, '--state', 'FAILED']);
    expect(onlyFailed.json()).toMatchObject({ deleted: 0 });
    const purged = await run(['--json', '--yes', 'purge', scope]);
    expect(purged.status).toBe(0);
    expect(purged.json()).toEqual({ scope, deleted: 1205, skipped: { LEASE_HELD: 1 } });
    expect((await run(['--json', 'stats', scope])).json()).toMatchObject({
      total: 1,
      states: { IN_PROGRESS: 1 },
    });
    expect(await store.get({ scope: lookalike, key: 'k' })).toMatchObject({ state: 'COMPLETED' });
  });

  it('the bin runs as a process: --json stats, and exit status 1 with the reason when Redis is unreachable', async () => {
    const bin = join(__dirname, '../../../packages/cli/src/bin.ts');
    const exec = promisify(execFile);
    const ok = await exec(process.execPath, [
      '--import',
      'tsx',
      bin,
      '--url',
      url,
      '--prefix',
      prefix,
      '--json',
      'stats',
      lookalike,
    ]);
    expect(JSON.parse(ok.stdout)).toMatchObject({ total: 1, states: { COMPLETED: 1 } });
    const down = await exec(process.execPath, [
      '--import',
      'tsx',
      bin,
      '--url',
      'redis://127.0.0.1:1',
      'stats',
      's',
    ]).catch((e: { code: number; stderr: string }) => e);
    expect(down).toMatchObject({
      code: 1,
      stderr: expect.stringMatching(/^idempotent-consumer: .*ECONNREFUSED/m),
    });
  });
});
