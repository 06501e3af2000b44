import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Redis } from 'ioredis';
import { RedisIdempotencyStore } from '../src';
import * as generated from '../src/generated/scripts';
import { SCRIPT_NUMBER_OF_KEYS } from '../src/tools';

const LUA_DIR = join(__dirname, '..', '..', '..', 'lua');
const luaFiles = readdirSync(LUA_DIR).filter((f) => f.endsWith('.lua'));
const source = (file: string) => readFileSync(join(LUA_DIR, file), 'utf8');
const header = (lua: string) => lua.slice(0, lua.indexOf(']]') + 2);
const body = (lua: string) => lua.slice(lua.indexOf(']]') + 2);
const INCLUDE_DIR = join(LUA_DIR, 'includes');
const includeFiles = readdirSync(INCLUDE_DIR).filter((f) => f.endsWith('.lua'));
/** The embedded (include-expanded) source of a script file. */
const embeddedOf = (file: string) => {
  const name = file.slice(0, -4).replace(/-(\w)/g, (_, c: string) => c.toUpperCase());
  return (generated as Record<string, { lua: string; sha1: string }>)[`${name}Script`]!;
};
const includesOf = (lua: string) =>
  [...lua.matchAll(/^--- @include "includes\/([\w-]+)"$/gm)].map((m) => m[1]!);

/** ARGV indexes a script's body reads. */
const argvUsed = (lua: string) => [
  ...new Set([...body(lua).matchAll(/ARGV\[(\d+)\]/g)].map((m) => Number(m[1]))),
];

/** Canned replies per script, in the shape each header documents. */
const REPLIES: Record<string, unknown> = {
  claim: ['ACQUIRED', 1, 1, 2000, 1000, 1],
  complete: ['OK', 1000],
  release: ['OK', 1000],
  fail: ['OK', 1000],
  extend: ['OK', 2000, 1000],
  start: ['OK', 1, 2000, 1000],
  markDeadLettered: ['OK', 1],
};

interface Call {
  /** The name the script was defined under (`idem_claim_…`). */
  command: string;
  /** The key and ARGV, without the SHA-1 or text and without numberOfKeys. */
  args: unknown[];
  pipelined: boolean;
  /** How a single call reached the fake server; pipelines go through the defined command. */
  via?: 'evalsha' | 'eval' | 'defined';
  numberOfKeys?: unknown;
}

const replyError = (message: string) => Object.assign(new Error(message), { name: 'ReplyError' });
const sha1Of = (lua: string) => createHash('sha1').update(lua).digest('hex');

/**
 * A fake ioredis client that records `defineCommand`, every `EVALSHA`/`EVAL` and every call of a defined
 * command (alone or in a pipeline). Its script cache (`cached`, SHA-1s) starts with every defined script, like a
 * server the client has used before; `EVALSHA` of a script not in it answers NOSCRIPT, and `EVAL` adds
 * it. `answers` replaces a script's canned reply (by script name: `claim`, `complete`, …).
 */
function fakeClient(isCluster: boolean) {
  const defined: { name: string; numberOfKeys: number; lua: string }[] = [];
  const calls: Call[] = [];
  const cached = new Set<string>();
  const answers: Record<string, () => Promise<unknown>> = {};
  const script = (name: string) => name.split('_')[1]!;
  const definedBySha = (sha1: string) => defined.find((d) => sha1Of(d.lua) === sha1)!;
  const answer = (name: string) => answers[script(name)]?.() ?? Promise.resolve(REPLIES[script(name)]);
  const client: Record<string, unknown> = {
    isCluster,
    defineCommand(name: string, definition: { numberOfKeys: number; lua: string }) {
      defined.push({ name, ...definition });
      cached.add(sha1Of(definition.lua));
      client[name] = async (...args: unknown[]) => {
        calls.push({ command: name, args, pipelined: false, via: 'defined' });
        return answer(name);
      };
    },
    async evalsha(sha1: string, numberOfKeys: unknown, ...args: unknown[]) {
      const d = definedBySha(sha1);
      calls.push({ command: d.name, args, pipelined: false, via: 'evalsha', numberOfKeys });
      if (!cached.has(sha1)) throw replyError('NOSCRIPT No matching script. Please use EVAL.');
      return answer(d.name);
    },
    async eval(lua: string, numberOfKeys: unknown, ...args: unknown[]) {
      const d = definedBySha(sha1Of(lua));
      calls.push({ command: d.name, args, pipelined: false, via: 'eval', numberOfKeys });
      cached.add(sha1Of(lua));
      return answer(d.name);
    },
    pipeline() {
      const queued: string[] = [];
      const p: Record<string, unknown> = {
        exec: async () => queued.map((name) => [null, REPLIES[script(name)]]),
      };
      for (const d of defined) {
        p[d.name] = (...args: unknown[]) => {
          calls.push({ command: d.name, args, pipelined: true });
          queued.push(d.name);
          return p;
        };
      }
      return p;
    },
    hgetall: async () => ({}),
    pttl: async () => -2,
  };
  return { client: client as unknown as Redis, defined, calls, cached, answers };
}

describe('Lua scripts: one key each, documented headers', () => {
  it('there is one script per operation', () => {
    expect(luaFiles.sort()).toEqual([
      'admin-purge.lua',
      'admin-release.lua',
      'claim.lua',
      'complete.lua',
      'extend.lua',
      'fail.lua',
      'give-back.lua',
      'mark-dead-lettered.lua',
      'release.lua',
      'start.lua',
    ]);
  });

  it.each(luaFiles)(
    '%s opens with a header block listing KEYS, ARGV (with units) and every reply',
    (file) => {
      const lua = source(file);
      expect(lua.startsWith('--[[\n')).toBe(true);
      const head = header(lua);
      expect(head).toMatch(/^\s+KEYS\[1\]\s+record key/m);
      expect(head).not.toMatch(/KEYS\[2\]/);
      for (const i of argvUsed(lua))
        expect(head).toMatch(new RegExp(`^\\s+ARGV\\[${i}\\]\\s+\\w+\\s+\\S`, 'm'));
      // Every ARGV the header lists is read by the body, and copied into a named local first.
      const listed = [...head.matchAll(/^\s+ARGV\[(\d+)\]/gm)].map((m) => Number(m[1]));
      expect(listed.sort()).toEqual(argvUsed(lua).sort());
      for (const i of listed)
        expect(body(lua)).toMatch(new RegExp(`^local \\w+ = (tonumber\\()?ARGV\\[${i}\\]`, 'm'));
      expect(body(lua)).toMatch(/^local key = KEYS\[1\]$/m);
      // Timings carry their unit.
      for (const m of head.matchAll(/ARGV\[\d+\]\s+(\w+)/g)) {
        if (/lease|retention|time/i.test(m[1]!)) expect(m[1]).toMatch(/Ms$/);
      }
      // Every reply head the body returns is documented in the header.
      expect(head).toMatch(/Replies/);
      // (With its includes: the fenced writes' shared frames build part of the reply, lua/includes/*.lua.)
      const returned = [...body(embeddedOf(file).lua).matchAll(/return \{'([A-Z_]+)'/g)].map((m) => m[1]!);
      expect(returned.length).toBeGreaterThan(0);
      for (const reply of returned) expect(head).toContain(`{'${reply}'`);
    },
  );

  it.each(luaFiles)('%s touches only KEYS[1] and reads the clock from the server (TIME)', (file) => {
    const b = body(source(file));
    expect([...b.matchAll(/KEYS\[(\d+)\]/g)].map((m) => m[1])).toEqual(['1']);
    expect(b).not.toMatch(/redis\.call\(/); // the script's own calls go through the `rcall` local
    // In the embedded script (includes expanded) every call targets `key`, apart from TIME.
    const embedded = body(embeddedOf(file).lua);
    for (const m of embedded.matchAll(/(?:rcall|redis\.call)\('(\w+)'(?:, (\w+))?/g)) {
      if (m[1] === 'TIME') continue;
      expect(m[2]).toBe('key');
    }
    if (/\bnow\b/.test(b)) expect(b).toMatch(/= serverClock\(\)/);
    expect(b).not.toMatch(/rcall\('TIME'\)/); // the clock is read in one place: includes/clock.lua
  });

  // The operators' scripts (admin-*.lua, the CLI's) are outside the consumer's state machine: they compare
  // the token an operator saw (0: any) and answer TOKEN_CHANGED, not the fence's LEASE_LOST.
  const consumerScripts = luaFiles.filter((f) => !f.startsWith('admin-'));

  // claim.lua issues the token, and give-back.lua names its claim by the nonce it was sent with (its caller
  // never got the token).
  it.each(consumerScripts.filter((f) => f !== 'claim.lua' && f !== 'give-back.lua'))(
    '%s checks its fencing token with the one shared fence (includes/fence.lua), never inline',
    (file) => {
      const lua = source(file);
      expect(includesOf(lua)).toEqual(expect.arrayContaining(['fence', 'fenced-write']));
      // Through the one frame of a fenced write (includes/fenced-write.lua), itself or one built on it.
      expect(body(lua)).toMatch(/^return (fencedWrite|renewLease|endClaim)\('[\w-]+', /m);
      expect(body(lua)).not.toMatch(/[=~]= *fencingToken|fencingToken *[=~]=/);
      expect(body(lua)).not.toMatch(/HMGET', key, 's', 't'/);
    },
  );

  it('the fence is written once: only includes/fence.lua compares a token', () => {
    const fence = readFileSync(join(INCLUDE_DIR, 'fence.lua'), 'utf8');
    expect(fence).toMatch(/token == fencingToken/);
    for (const file of consumerScripts) expect(body(source(file))).not.toMatch(/token [=~]= /);
  });

  it('the embedded scripts are the current lua/*.lua files with their includes expanded once', () => {
    for (const file of luaFiles) {
      const lua = source(file);
      const embedded = embeddedOf(file);
      expect(embedded.sha1).toBe(createHash('sha1').update(embedded.lua).digest('hex'));
      expect(embedded.lua).not.toMatch(/^--- @include/m);
      for (const line of lua.split('\n'))
        if (!line.startsWith('--- @include')) expect(embedded.lua).toContain(line);
      for (const inc of includesOf(lua)) {
        const text = readFileSync(join(INCLUDE_DIR, `${inc}.lua`), 'utf8').trimEnd();
        expect(embedded.lua.split(text)).toHaveLength(2); // exactly once
      }
    }
    expect(includeFiles.sort()).toEqual([
      'clock.lua',
      'end-claim.lua',
      'fence.lua',
      'fenced-write.lua',
      'fingerprint.lua',
      'lease.lua',
      'notify.lua',
    ]);
  });
});

describe('RedisIdempotencyStore script calls (fake client)', () => {
  const id = { scope: 'orders', key: 'o-1' };
  const lease = { leaseMs: 1000, retentionMs: 5000 };

  it.each([false, true])(
    'every script is defined with numberOfKeys 1 and every call passes exactly one key (cluster %s)',
    async (isCluster) => {
      const { client, defined, calls } = fakeClient(isCluster);
      const store = new RedisIdempotencyStore({ redis: client }, { keyPrefix: 'p' });
      expect(SCRIPT_NUMBER_OF_KEYS).toBe(1);
      expect(defined.map((d) => d.numberOfKeys)).toEqual([1, 1, 1, 1, 1, 1, 1, 1]);
      for (const d of defined)
        expect(d.name).toMatch(
          /^idem_(claim|complete|release|fail|extend|start|markDeadLettered|giveBack)_[0-9a-f]{8}$/,
        );

      await store.claim(id, { ...lease, fingerprint: 'f'.repeat(64), maxAttempts: 3 });
      await store.claimMany([
        { id, options: lease },
        { id: { scope: 'orders', key: 'o-2' }, options: lease },
      ]);
      await store.complete(id, 1, { retentionMs: 5000, result: 'j1' });
      await store.release(id, 1, { retentionMs: 5000 });
      await store.fail(id, 1, { retentionMs: 5000, error: 'E' });
      await store.extend(id, 1, lease);
      await store.start(id, 1, lease);
      await store.markDeadLettered(id, 1);

      const argCount: Record<string, number> = {};
      for (const d of defined) argCount[d.name] = argvUsed(d.lua).length;
      expect(calls).toHaveLength(9);
      expect(calls.filter((c) => c.pipelined)).toHaveLength(isCluster ? 0 : 2);
      for (const call of calls) {
        // A Cluster goes through the defined command: ioredis before 5.11 auto-pipelines a Cluster's
        // commands by their first argument, which for a plain EVALSHA is the SHA-1, not the key.
        if (!call.pipelined)
          expect(call).toMatchObject(isCluster ? { via: 'defined' } : { via: 'evalsha', numberOfKeys: 1 });
        const [key, ...argv] = call.args;
        expect(key).toMatch(/^p:6:orders:o-\d$/);
        expect(argv).toHaveLength(argCount[call.command]!);
        for (const a of argv) expect(['string', 'number']).toContain(typeof a);
      }
      expect(calls[0]!.args).toEqual([
        'p:6:orders:o-1',
        1000,
        5000,
        'f'.repeat(64),
        3,
        '0',
        Buffer.from('f'.repeat(64), 'hex').toString('base64').replace(/=+$/, ''),
        expect.stringMatching(/^[\w-]{9,}$/),
      ]);
      // Every claim names itself with a nonce of its own (lua/claim.lua ARGV[7]).
      const nonces = calls.slice(0, 3).map((c) => c.args[7]);
      expect(new Set(nonces).size).toBe(3);
      expect(calls[3]!.args).toEqual(['p:6:orders:o-1', 1, 5000, '1', 'j1']);
    },
  );

  it('a second store on the same client does not define the scripts again', () => {
    const { client, defined } = fakeClient(false);
    new RedisIdempotencyStore({ redis: client });
    new RedisIdempotencyStore({ redis: client }, { keyPrefix: 'other' });
    expect(defined).toHaveLength(8);
  });

  it('maps client failures: a refused script is UNEXPECTED_STORE_REPLY, a transient one STORE_UNAVAILABLE', async () => {
    const { client, answers } = fakeClient(false);
    const store = new RedisIdempotencyStore({ redis: client });
    answers.claim = async () => {
      throw replyError('ERR idempotency claim: bad arguments');
    };
    await expect(store.claim(id, lease)).rejects.toMatchObject({ code: 'UNEXPECTED_STORE_REPLY' });
    for (const transient of [
      'LOADING Redis is loading',
      'CLUSTERDOWN The cluster is down',
      "READONLY You can't write",
    ]) {
      answers.claim = async () => {
        throw replyError(transient);
      };
      await expect(store.claim(id, lease)).rejects.toMatchObject({
        code: 'STORE_UNAVAILABLE',
        retryable: true,
      });
    }
    answers.claim = async () => {
      throw new Error('Connection is closed.');
    };
    const err = await store.claim(id, lease).catch((e: unknown) => e);
    expect(err).toMatchObject({
      code: 'STORE_UNAVAILABLE',
      cause: expect.objectContaining({ message: 'Connection is closed.' }),
    });
    answers.claim = async () => ['SOMETHING', 1];
    await expect(store.claim(id, lease)).rejects.toMatchObject({ code: 'UNEXPECTED_STORE_REPLY' });
  });

  it('a server that lost its script cache (NOSCRIPT) gets the script text once, then EVALSHA again', async () => {
    const { client, calls, cached } = fakeClient(false);
    const store = new RedisIdempotencyStore({ redis: client });
    cached.clear(); // a restart, or SCRIPT FLUSH
    await expect(store.claim(id, lease)).resolves.toMatchObject({ outcome: 'ACQUIRED' });
    await expect(store.claim(id, lease)).resolves.toMatchObject({ outcome: 'ACQUIRED' });
    expect(calls.map((c) => c.via)).toEqual(['evalsha', 'eval', 'evalsha']);
    expect(calls[1]!.args).toEqual(calls[0]!.args); // the same key and ARGV, with the text instead of the SHA-1
  });

  it('a call that does not settle within commandTimeoutMs rejects with STORE_UNAVAILABLE', async () => {
    const { client, answers } = fakeClient(false);
    const store = new RedisIdempotencyStore({ redis: client }, { commandTimeoutMs: 50 });
    answers.complete = () => new Promise(() => {});
    const started = Date.now();
    await expect(store.complete(id, 1, { retentionMs: 1 })).rejects.toMatchObject({
      code: 'STORE_UNAVAILABLE',
      message: expect.stringContaining('50 ms'),
    });
    expect(Date.now() - started).toBeLessThan(1000);
  });
});
