import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { PassThrough, Writable } from 'node:stream';
import { redactUrl } from '@idempotent-consumer/core/tools';
import { runCli } from '../src';
import { viewFields } from '../src/commands/inspect';
import { cut, flagsOf, recordView } from '../src/record-view';
import { trackWrites } from '../src/tracked-stream';
import { versionFrom } from '../src/version';

/** Runs the CLI in-process with no Redis behind it: only what fails or prints before connecting. */
async function run(args: string[]) {
  const stdout = new PassThrough();
  const stderr = new PassThrough();
  let out = '';
  let err = '';
  stdout.on('data', (c: Buffer) => {
    out += c.toString();
  });
  stderr.on('data', (c: Buffer) => {
    err += c.toString();
  });
  const status = await runCli(args, {
    stdout,
    stderr,
    stdin: new PassThrough(),
    interactive: false,
    env: {},
  });
  return { status, out, err };
}

describe('idempotent-consumer CLI (no Redis)', () => {
  it('--help lists every command and exits 0', async () => {
    const { status, out } = await run(['--help']);
    expect(status).toBe(0);
    for (const command of ['inspect', 'list', 'stats', 'release', 'purge']) expect(out).toContain(command);
  });

  it.each([['--version'], ['-V']])(
    '%s prints the package version and exits 0 (was: unknown option, exit 2)',
    async (flag) => {
      const { version } = JSON.parse(readFileSync(join(__dirname, '..', 'package.json'), 'utf8')) as {
        version: string;
      };
      const { status, out, err } = await run([flag]);
      expect(err).toBe('');
      expect(out).toBe(`${version}\n`);
      expect(status).toBe(0);
    },
  );

  it.each([
    [
      'the read throws (a bundle without package.json)',
      () => {
        throw Object.assign(new Error('ENOENT: no such file or directory'), { code: 'ENOENT' });
      },
    ],
    ['it is not JSON', () => '<html>'],
    ['it has no version', () => '{"name":"@idempotent-consumer/cli"}'],
    ['its version is not a string', () => '{"version":3}'],
  ])("the version falls back to 'unknown' when package.json cannot be read: %s", (_what, read) => {
    expect(versionFrom(read)).toBe('unknown');
  });

  it('the version is the one of the package.json read', () => {
    expect(versionFrom(() => '{"name":"x","version":"1.2.3"}')).toBe('1.2.3');
  });

  it.each([
    [['frobnicate'], /unknown command 'frobnicate'/],
    [['inspect', 'scope-only'], /missing required argument 'key'/],
    [['list', 's', '--state', 'DONE'], /unknown state "DONE"/],
    [['list', 's', '--limit', '0'], /a positive integer is expected/],
  ])('%j is a usage error (exit 2) before any connection', async (args, message) => {
    const { status, err } = await run(args);
    expect(status).toBe(2);
    expect(err).toMatch(message);
  });

  it('an unreachable Redis is exit 1 with the URL (password hidden) and the reason', async () => {
    const { status, err } = await run(['--url', 'redis://user:secret@127.0.0.1:1', 'stats', 's']);
    expect(status).toBe(1);
    expect(err).toMatch(/^idempotent-consumer: Cannot reach Redis at redis:\/\/user:\*\*\*@127\.0\.0\.1:1/);
    expect(err).not.toContain('secret');
  });

  it.each([['admin:secret@127.0.0.1:1'], ['//admin:secret@127.0.0.1:1'], ['127.0.0.1:1?password=secret']])(
    'a URL without its redis:// (%s: ioredis adds it and reads the password) is hidden too (was: printed whole)',
    async (url) => {
      const { status, err } = await run(['--url', url, 'stats', 's']);
      expect(status).toBe(1);
      expect(err).toMatch(/^idempotent-consumer: Cannot reach Redis at .*ECONNREFUSED/);
      expect(err).not.toContain('secret');
    },
  );

  it('a Unix socket path keeps its form, its password parameter hidden', () => {
    expect(redactUrl('/run/redis.sock?password=secret&db=1')).toBe('/run/redis.sock?password=***&db=1');
    expect(redactUrl('/run/redis.sock')).toBe('/run/redis.sock');
  });

  it('a password given as a URL parameter (?password=, which ioredis reads) is hidden too', async () => {
    const { status, err } = await run([
      '--url',
      'redis://127.0.0.1:1/0?password=secret&family=4',
      'stats',
      's',
    ]);
    expect(status).toBe(1);
    expect(err).toMatch(
      /^idempotent-consumer: Cannot reach Redis at redis:\/\/127\.0\.0\.1:1\/0\?password=\*\*\*&family=4/,
    );
    expect(err).not.toContain('secret');
  });

  it('an unreachable Redis leaves no timer behind: the process can exit as soon as the CLI returns', async () => {
    // ioredis' disconnect() on a client whose connection is already closed waits up to 2 s for a `close`
    // event that never comes (a ref'd timer): `idempotent-consumer` lingered 2 s before exiting with 1.
    const timers = () => process.getActiveResourcesInfo().filter((kind) => kind === 'Timeout').length;
    const before = timers();
    const { status } = await run(['--url', 'redis://127.0.0.1:1', 'stats', 's']);
    expect(status).toBe(1);
    // At most as many: a timer of an earlier test may end meanwhile, but the run must not add one.
    expect(timers()).toBeLessThanOrEqual(before);
  });
});

/** A stream whose every write fails with `code`, as a pipe whose reader closed fails with EPIPE. */
const failingWrites = (code: string) =>
  new Writable({
    write(_chunk, _encoding, callback) {
      callback(Object.assign(new Error(`write ${code}`), { code }));
    },
  });

describe('idempotent-consumer CLI writing to a stdout that fails', () => {
  const io = (stdout: Writable, stderr: Writable = new PassThrough().resume()) => ({
    stdout,
    stderr,
    stdin: new PassThrough(),
    interactive: false,
    env: {},
  });

  it('a reader that went away (EPIPE): a read-only output stops quietly with its status (was an unhandled error event)', async () => {
    const stderr = new PassThrough();
    let err = '';
    stderr.on('data', (c: Buffer) => {
      err += c.toString();
    });
    expect(await runCli(['--help'], io(failingWrites('EPIPE'), stderr))).toBe(0);
    expect(err).toBe('');
  });

  it('stderr closed as well: nothing is thrown, the status stays', async () => {
    expect(await runCli(['frobnicate'], io(failingWrites('EPIPE'), failingWrites('EPIPE')))).toBe(2);
  });
});

describe('trackWrites', () => {
  it('EPIPE is a cut output, and nothing more is written after it', async () => {
    let writes = 0;
    const stream = new Writable({
      write(_chunk, _encoding, callback) {
        writes += 1;
        callback(Object.assign(new Error('write EPIPE'), { code: 'EPIPE' }));
      },
    });
    const tracked = trackWrites(stream);
    tracked.write('a');
    expect(await tracked.settled()).toEqual({ kind: 'cut' });
    tracked.write('b');
    expect(await tracked.settled()).toEqual({ kind: 'cut' });
    expect(writes).toBe(1);
  });

  it('another write error (a full disk) is a failed output, with its error', async () => {
    const tracked = trackWrites(failingWrites('ENOSPC'));
    tracked.write('a');
    expect(await tracked.settled()).toEqual({
      kind: 'failed',
      error: expect.objectContaining({ code: 'ENOSPC' }),
    });
  });

  it('writes handed on are written', async () => {
    const tracked = trackWrites(new PassThrough().resume());
    tracked.write('a');
    expect(await tracked.settled()).toEqual({ kind: 'written' });
  });
});

describe('recordView', () => {
  const base = {
    fencingToken: 3,
    attempt: 2,
    fingerprint: '',
    result: undefined,
    error: undefined,
    createdAtMs: 1_700_000_000_000,
    updatedAtMs: 1_700_000_001_000,
    ttlMs: 5000,
    reserved: false,
    deadLettered: false,
    abandoned: false,
    lapsed: false,
  };

  it('shows a record FAILED only because its last lease lapsed (l): a flag in list, a row in inspect, the field in --json', () => {
    const failed = {
      ...base,
      state: 'FAILED' as const,
      leaseExpiresAtMs: undefined,
      error: 'ATTEMPTS_EXHAUSTED',
    };
    const lapsed = recordView({ scope: 's', key: 'k' }, { ...failed, lapsed: true }, 0, 50);
    // Before: the store's record had no `lapsed`, so nothing told this FAILED record from any other.
    expect(lapsed.lapsed).toBe(true);
    expect(flagsOf(lapsed)).toEqual(['lapsed']);
    expect(Object.fromEntries(viewFields(lapsed)).lapsed).toMatch(/^yes: /);
    const other = recordView({ scope: 's', key: 'k' }, failed, 0, 50);
    expect(other.lapsed).toBe(false);
    expect(flagsOf(other)).toEqual([]);
    expect(Object.fromEntries(viewFields(other)).lapsed).toBeUndefined();
  });

  it('measures the lease on the server clock: remaining, or lapsed (negative)', () => {
    const held = recordView(
      { scope: 's', key: 'k' },
      { ...base, state: 'IN_PROGRESS', leaseExpiresAtMs: 1_700_000_010_000 },
      1_700_000_004_000,
      50,
    );
    expect(held).toMatchObject({ leaseRemainingMs: 6000, leaseExpiresAt: '2023-11-14T22:13:30.000Z' });
    const lapsed = recordView(
      { scope: 's', key: 'k' },
      { ...base, state: 'IN_PROGRESS', leaseExpiresAtMs: 1_700_000_010_000 },
      1_700_000_012_500,
      50,
    );
    expect(lapsed.leaseRemainingMs).toBe(-2500);
  });

  it('a lease that ends at the server time has lapsed, as the scripts judge it (claim.lua: held while expiry > now)', () => {
    const view = (serverTimeMs: number) =>
      recordView(
        { scope: 's', key: 'k' },
        { ...base, state: 'IN_PROGRESS', leaseExpiresAtMs: 1_700_000_010_000 },
        serverTimeMs,
        50,
      );
    const lease = (serverTimeMs: number) => Object.fromEntries(viewFields(view(serverTimeMs))).lease;
    expect(lease(1_700_000_009_999)).toMatch(/^1 ms remaining/);
    // Before: "0 ms remaining (until …)", while the next claim already takes the record over.
    expect(lease(1_700_000_010_000)).toBe('lapsed 0 ms ago (the next claim takes it over)');
  });

  it('decodes the stored result (JSON) and cuts long previews', () => {
    const view = recordView(
      { scope: 's', key: 'k' },
      { ...base, state: 'COMPLETED', leaseExpiresAtMs: undefined, result: 'j{"a":"xxxxxxxxxx"}' },
      0,
      8,
    );
    expect(view).toMatchObject({
      leaseRemainingMs: null,
      resultPreview: '{"a":"xx… (18 chars)',
      errorPreview: null,
    });
    expect(cut('short', 10)).toBe('short');
  });
});
