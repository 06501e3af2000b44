import { buildRecordKey } from '@idempotent-consumer/core';
import { describeWithServices } from '../../support/service';
import { useRedisStore } from '../core/redis-target';
import { cli } from './run-cli';

const LEASE_MS = 600_000;
const RETENTION_MS = 60_000;

// What an operator is shown: the record state markers in `list` as in `inspect`, and the record a
// `release` changes before it asks, in --json as without it.
describeWithServices(['redis'], 'idempotent-consumer CLI: what the operator is shown', ({ redis: url }) => {
  const suite = useRedisStore(url, 'cli-shown');
  const run = (args: string[], answer?: string | (() => Promise<string>)) =>
    cli(url, ['--prefix', suite.prefix, ...args], answer);

  it('list shows reserved, dead-lettered, abandoned and lapsed records in a flags column, as inspect does, and in --json', async () => {
    const scope = 'flags';
    const claim = (key: string, reserve = false) =>
      suite.store.claim({ scope, key }, { leaseMs: LEASE_MS, retentionMs: RETENTION_MS, reserve });
    await claim('reserved', true);
    const dead = await claim('dead-lettered');
    await suite.store.fail({ scope, key: 'dead-lettered' }, dead.fencingToken, {
      retentionMs: RETENTION_MS,
      error: 'poison',
    });
    expect(
      await suite.store.markDeadLettered({ scope, key: 'dead-lettered' }, dead.fencingToken),
    ).toMatchObject({
      ok: true,
    });
    const gaveUp = await claim('abandoned');
    await suite.store.release({ scope, key: 'abandoned' }, gaveUp.fencingToken, {
      retentionMs: RETENTION_MS,
      abandoned: true,
    });
    // FAILED only because its last lease lapsed (l): a short lease at maxAttempts 1, claimed again once lapsed.
    const lapsedId = { scope, key: 'lapsed' };
    const lapsing = { leaseMs: 1, retentionMs: RETENTION_MS, maxAttempts: 1 };
    await suite.store.claim(lapsedId, lapsing);
    let again = await suite.store.claim(lapsedId, lapsing);
    while (again.outcome === 'CONFLICT') again = await suite.store.claim(lapsedId, lapsing);
    expect(again).toMatchObject({ outcome: 'FAILED' });
    expect(await suite.store.get(lapsedId)).toMatchObject({ state: 'FAILED', lapsed: true });
    const plain = await claim('plain');
    await suite.store.complete({ scope, key: 'plain' }, plain.fencingToken, { retentionMs: RETENTION_MS });

    // inspect shows each marker (the reference).
    for (const [key, row] of [
      ['reserved', /│ reserved\s+│ yes/],
      ['dead-lettered', /│ dead-lettered\s+│ yes/],
      ['abandoned', /│ abandoned\s+│ yes/],
      ['lapsed', /│ lapsed\s+│ yes/],
    ] as const) {
      expect((await run(['inspect', scope, key])).stdout).toMatch(row);
    }

    const human = await run(['list', scope]);
    expect(human.status).toBe(0);
    const lines = human.stdout.split('\n');
    const cells = (line: string) => line.split('│').map((c) => c.trim());
    const header = cells(lines.find((l) => l.includes('key'))!);
    const flagsAt = header.indexOf('flags');
    // Before: no flags column; a reserved, dead-lettered or abandoned record looked like any other.
    expect(flagsAt).toBeGreaterThan(0);
    const flagsOf = (key: string) => cells(lines.find((l) => cells(l)[1] === key)!)[flagsAt];
    expect(flagsOf('reserved')).toBe('reserved');
    expect(flagsOf('dead-lettered')).toBe('dead-lettered');
    expect(flagsOf('abandoned')).toBe('abandoned');
    // Before: nothing, the record's `l` was not read.
    expect(flagsOf('lapsed')).toBe('lapsed');
    expect(flagsOf('plain')).toBe('');

    const json = await run(['--json', 'list', scope]);
    const records = json.json<{ records: Record<string, unknown>[] }>().records;
    const byKey = new Map(records.map((r) => [r.key, r]));
    const marks = (key: string) => {
      const { reserved, deadLettered, abandoned, lapsed } = byKey.get(key)!;
      return { reserved, deadLettered, abandoned, lapsed };
    };
    const none = { reserved: false, deadLettered: false, abandoned: false, lapsed: false };
    expect(marks('reserved')).toEqual({ ...none, reserved: true });
    expect(marks('dead-lettered')).toEqual({ ...none, deadLettered: true });
    expect(marks('abandoned')).toEqual({ ...none, abandoned: true });
    expect(marks('lapsed')).toEqual({ ...none, lapsed: true });
    expect(marks('plain')).toEqual(none);
  });

  it('release --json shows the record on stderr before it asks, and stdout stays one JSON document', async () => {
    const scope = 'release-json';
    const id = { scope, key: 'stuck' };
    const claim = await suite.store.claim(id, { leaseMs: LEASE_MS, retentionMs: RETENTION_MS });
    const released = await run(['--json', 'release', scope, id.key], 'y\n');
    expect(released.status).toBe(0);
    expect(released.json()).toMatchObject({ outcome: 'OK', previousState: 'IN_PROGRESS' });
    const prompt = released.stderr.indexOf('[y/N]');
    expect(prompt).toBeGreaterThan(0);
    const beforePrompt = released.stderr.slice(0, prompt);
    // Before: only the question; the record (token, attempt, lease, times) was never shown with --json.
    expect(beforePrompt).toMatch(/│ key\s+│ stuck/);
    expect(beforePrompt).toMatch(/│ state\s+│ IN_PROGRESS/);
    expect(beforePrompt).toMatch(new RegExp(`│ fencing token\\s+│ ${claim.fencingToken}`));
    expect(beforePrompt).toMatch(/│ lease\s+│ \d+ ms remaining/);

    // The same record shown without --json (the reference), and nothing of it on stdout with --json.
    const again = await suite.store.claim(
      { scope, key: 'other' },
      { leaseMs: LEASE_MS, retentionMs: RETENTION_MS },
    );
    const refused = await run(['release', scope, 'other']);
    expect(refused.status).toBe(2);
    expect(refused.stderr).toMatch(new RegExp(`│ fencing token\\s+│ ${again.fencingToken}`));
    const refusedJson = await run(['--json', 'release', scope, 'other']);
    expect(refusedJson.status).toBe(2);
    expect(refusedJson.stdout).toBe('');
    expect(refusedJson.stderr).toMatch(new RegExp(`│ fencing token\\s+│ ${again.fencingToken}`));
    expect(refusedJson.stderr).toMatch(/pass --yes/);

    // --json --yes asks nothing: stderr stays empty for scripts, stdout is the report.
    const scripted = await run(['--json', '--yes', 'release', scope, 'other']);
    expect(scripted.status).toBe(0);
    expect(scripted.stderr).toBe('');
    expect(scripted.json()).toMatchObject({ outcome: 'OK', fencingToken: again.fencingToken });
  });

  it('control characters of a key, a result or an error are shown escaped in tables, never sent to the terminal (was: raw ESC sequences)', async () => {
    const scope = 'escapes';
    // A key and an error text come from messages and handlers: an ESC sequence there would retitle,
    // clear or rewrite the operator's terminal, and a CR would print over what the table says.
    const key = 'evil\u001b]0;PWNED\u0007\u001b[2J\r\u009b31m';
    const id = { scope, key };
    const claim = await suite.store.claim(id, { leaseMs: LEASE_MS, retentionMs: RETENTION_MS });
    await suite.store.fail(id, claim.fencingToken, {
      retentionMs: RETENTION_MS,
      error: 'boom\u001b[31mRED\u001b[0m\rok',
    });
    // biome-ignore lint/suspicious/noControlCharactersInRegex: what must not reach the terminal
    const control = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/;
    const listed = await run(['list', scope]);
    expect(listed.status).toBe(0);
    expect(listed.stdout).not.toMatch(control);
    expect(listed.stdout).toContain('evil\\u001b]0;PWNED\\u0007\\u001b[2J\\r\\u009b31m');
    const inspected = await run(['inspect', scope, key]);
    expect(inspected.status).toBe(0);
    expect(inspected.stdout).not.toMatch(control);
    expect(inspected.stdout).toContain('boom\\u001b[31mRED\\u001b[0m\\rok');
    const refused = await run(['release', scope, key]);
    expect(refused.status).toBe(2);
    expect(refused.stderr).not.toMatch(control);
    // --json keeps the text itself (JSON escapes it).
    expect((await run(['--json', 'inspect', scope, key])).json()).toMatchObject({ key });
  });

  it('release --json --yes of a record whose lease a worker holds says so in its report (was: nothing said)', async () => {
    const scope = 'release-held';
    const id = { scope, key: 'held' };
    await suite.store.claim(id, { leaseMs: LEASE_MS, retentionMs: RETENTION_MS });
    const scripted = await run(['--json', '--yes', 'release', scope, id.key]);
    expect(scripted.status).toBe(0);
    expect(scripted.json()).toMatchObject({
      outcome: 'OK',
      previousState: 'IN_PROGRESS',
      leaseHeld: true,
      leaseRemainingMs: expect.any(Number),
    });
    expect(scripted.json<{ leaseRemainingMs: number }>().leaseRemainingMs).toBeGreaterThan(0);
    await suite.store.claim({ scope, key: 'other' }, { leaseMs: LEASE_MS, retentionMs: RETENTION_MS });
    const human = await run(['--yes', 'release', scope, 'other']);
    expect(human.stdout).toMatch(/Released \(was IN_PROGRESS, .*a worker's lease had \d+ ms left/);
  });

  it('a key of the scope that is not a hash (another program wrote it) is left out of list and stats, and kept by purge (was: WRONGTYPE, exit 1)', async () => {
    const scope = 'not-a-hash';
    const claim = await suite.store.claim(
      { scope, key: 'a' },
      { leaseMs: LEASE_MS, retentionMs: RETENTION_MS },
    );
    await suite.store.complete({ scope, key: 'a' }, claim.fencingToken, { retentionMs: RETENTION_MS });
    const foreign = buildRecordKey(suite.prefix, { scope, key: 'b' });
    await suite.redis.set(foreign, 'not a record');
    const stats = await run(['--json', 'stats', scope]);
    expect(stats.stderr).toBe('');
    expect(stats.status).toBe(0);
    expect(stats.json()).toMatchObject({ total: 1, states: { COMPLETED: 1 } });
    const listed = await run(['--json', 'list', scope]);
    expect(listed.status).toBe(0);
    expect(listed.json<{ records: { key: string }[] }>().records.map((r) => r.key)).toEqual(['a']);
    const purged = await run(['--json', '--yes', 'purge', scope]);
    expect(purged.status).toBe(0);
    expect(purged.json()).toEqual({ scope, deleted: 1, skipped: { NOT_A_RECORD: 1 } });
    expect(await suite.redis.get(foreign)).toBe('not a record');
  });

  it('inspect and release of a key that is not a hash (another program wrote it) answer NOT_A_RECORD with exit status 3, in tables and --json, and leave the key alone (was: WRONGTYPE, exit 1)', async () => {
    const scope = 'not-a-hash-by-key';
    const foreign = buildRecordKey(suite.prefix, { scope, key: 'theirs' });
    const listKey = buildRecordKey(suite.prefix, { scope, key: 'their-list' });
    await suite.redis.set(foreign, 'not a record', 'PX', 600_000);
    await suite.redis.rpush(listKey, 'x', 'y');
    const untouched = async () => {
      expect(await suite.redis.get(foreign)).toBe('not a record');
      expect(await suite.redis.pttl(foreign)).toBeGreaterThan(500_000);
      expect(await suite.redis.lrange(listKey, 0, -1)).toEqual(['x', 'y']);
      expect(await suite.redis.pttl(listKey)).toBe(-1);
    };
    for (const key of ['theirs', 'their-list']) {
      const human = await run(['inspect', scope, key]);
      expect({ status: human.status, stderr: human.stderr }).toEqual({ status: 3, stderr: '' });
      expect(human.stdout).toBe(
        `Key ${JSON.stringify(key)} in scope ${JSON.stringify(scope)} is not an idempotency record (not a hash: another program's key)\n`,
      );
      const json = await run(['--json', 'inspect', scope, key]);
      expect({ status: json.status, stderr: json.stderr }).toEqual({ status: 3, stderr: '' });
      expect(json.json()).toEqual({ scope, key, found: false, notARecord: true });

      for (const yes of [[], ['--yes']]) {
        const released = await run([...yes, 'release', scope, key], 'y\n');
        expect({ status: released.status, stderr: released.stderr }).toEqual({ status: 3, stderr: '' });
        expect(released.stdout).toBe(
          `Not released: key ${JSON.stringify(key)} in scope ${JSON.stringify(scope)} is not an idempotency record (not a hash: another program's key); nothing changed\n`,
        );
        const releasedJson = await run(['--json', ...yes, 'release', scope, key], 'y\n');
        expect({ status: releasedJson.status, stderr: releasedJson.stderr }).toEqual({
          status: 3,
          stderr: '',
        });
        expect(releasedJson.json()).toEqual({ scope, key, outcome: 'NOT_A_RECORD' });
      }
    }
    await untouched();
    const purged = await run(['--json', '--yes', 'purge', scope]);
    expect(purged.status).toBe(0);
    expect(purged.json()).toEqual({ scope, deleted: 0, skipped: {} });
    await untouched();
  });

  it('purge asks the same question with --json as without (count, states, scope) and keeps stdout JSON', async () => {
    const scope = 'purge-json';
    for (const key of ['a', 'b']) {
      const claim = await suite.store.claim({ scope, key }, { leaseMs: LEASE_MS, retentionMs: RETENTION_MS });
      await suite.store.complete({ scope, key }, claim.fencingToken, { retentionMs: RETENTION_MS });
    }
    const human = await run(['purge', scope, '--state', 'COMPLETED'], 'n\n');
    const json = await run(['--json', 'purge', scope, '--state', 'COMPLETED'], 'n\n');
    expect(human.status).toBe(2);
    expect(json.status).toBe(2);
    expect(json.stdout).toBe('');
    expect(human.stderr).toMatch(/Delete 2 record\(s\) \(COMPLETED\) of scope "purge-json"\?.*\[y\/N\]/);
    expect(json.stderr).toBe(human.stderr);
    const done = await run(['--json', 'purge', scope, '--state', 'COMPLETED'], 'y\n');
    expect(done.status).toBe(0);
    expect(done.json()).toEqual({ scope, deleted: 2, skipped: {} });
  });
});
