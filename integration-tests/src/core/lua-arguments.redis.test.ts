import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import Redis from 'ioredis';
import {
  claimScript,
  completeScript,
  extendScript,
  failScript,
  releaseScript,
  startScript,
} from '../../../packages/core/src/generated/scripts';
import { describeWithServices } from '../../support/service';

/**
 * The Lua contract's arguments on a real server, called with EVAL as any client could: integers are written
 * to the record with every digit (they go to `redis.call` as Lua numbers, or as the server clock's own
 * digits: lua/includes/clock.lua), and a lease or retention that is not a whole number of milliseconds is
 * refused as bad arguments before anything is written.
 */
describeWithServices(['redis'], 'Lua scripts: integer arguments (real Redis)', ({ redis: url }) => {
  let redis: Redis;
  const prefix = `lua-arguments:${randomUUID()}`;
  beforeAll(() => {
    redis = new Redis(url);
  });
  afterAll(async () => {
    const keys = await redis.keys(`${prefix}:*`);
    if (keys.length > 0) await redis.del(...keys);
    await redis.quit();
  });

  const run = (script: { lua: string }, key: string, ...args: (string | number)[]) =>
    redis.eval(script.lua, 1, key, ...args) as Promise<unknown[]>;
  const claim = (key: string, reserve = '0') => run(claimScript, key, 30_000, 600_000, '', 0, reserve, '');

  it('a claim writes its fencing token, lease expiry and times with every digit', async () => {
    const key = `${prefix}:digits`;
    const [outcome, token, , leaseExpiresAtMs, nowMs] = await claim(key);
    expect(outcome).toBe('ACQUIRED');
    const record = await redis.hgetall(key);
    expect(record.t).toBe(String(token));
    expect(record.t).toMatch(/^\d{16}$/); // microseconds since 1970: 16 digits, no exponent
    expect(record.e).toBe(String(leaseExpiresAtMs));
    expect(record.u).toBe(String(nowMs));
    expect(record.c).toBe(String(nowMs));
    expect(record.a).toBe('1');
    const [ok] = await run(completeScript, key, token as number, 600_000, '1', 'j1');
    expect(ok).toBe('OK');
    const completed = await redis.hgetall(key);
    expect(completed).toEqual({ s: 'C', t: String(token), w: expect.stringMatching(/^\d+$/), r: 'j1' });
  });

  it("the clock's text pads the microseconds TIME sends without leading zeros", async () => {
    // clockText itself, on TIME replies whose microseconds have 1 to 6 digits: a real claim meets the
    // short ones only when the clock happens to be early in its second.
    const clock = readFileSync(join(__dirname, '../../../lua/includes/clock.lua'), 'utf8');
    const text = (seconds: string, micros: string) =>
      redis.eval(`${clock}\nreturn {clockText({ARGV[1], ARGV[2]})}`, 0, seconds, micros) as Promise<string[]>;
    for (const micros of [0, 7, 21_122, 99_999, 100_000, 999_999]) {
      const seconds = 1_795_557_696;
      expect(await text(String(seconds), String(micros))).toEqual([
        String(seconds * 1000 + Math.floor(micros / 1000)),
        String(seconds * 1_000_000 + micros),
      ]);
    }
  });

  it('a token ahead of the clock grows by one and is written with every digit', async () => {
    // The clock went back (or many claims fell in one microsecond): the new token is the stored one + 1,
    // not the clock's digits.
    const key = `${prefix}:ahead`;
    await redis.hset(key, { s: 'R', t: '4000000000000000', a: '1' });
    const [outcome, token] = await claim(key);
    expect([outcome, token]).toEqual(['ACQUIRED', 4_000_000_000_000_001]);
    expect(await redis.hget(key, 't')).toBe('4000000000000001');
  });

  it('a reservation started counts its attempt as a whole number', async () => {
    const key = `${prefix}:start`;
    const [, token] = await claim(key, '1');
    expect(await redis.hget(key, 'a')).toBe('0');
    const [ok, attempt] = await run(startScript, key, token as number, 30_000, 600_000);
    expect([ok, attempt]).toEqual(['OK', 1]);
    const record = await redis.hgetall(key);
    expect(record.a).toBe('1');
    expect(record.v).toBeUndefined();
  });

  it("fail's abandoned flag: '1' marks the FAILED record b, '0' and absent (callers before it) do not", async () => {
    for (const [flag, b] of [
      [['1'], '1'],
      [['0'], undefined],
      [[], undefined],
    ] as const) {
      const key = `${prefix}:fail-abandoned:${flag.join('') || 'absent'}`;
      const [, token] = await claim(key);
      expect(await run(failScript, key, token as number, 600_000, 'E', ...flag)).toEqual([
        'OK',
        expect.any(Number),
      ]);
      expect(await redis.hgetall(key)).toMatchObject({ s: 'F', x: 'E' });
      expect((await redis.hgetall(key)).b).toBe(b);
    }
  });

  it.each([
    ['claim', 'leaseMs', (key: string) => run(claimScript, key, 1000.5, 600_000, '', 0, '0', '')],
    ['claim', 'retentionMs', (key: string) => run(claimScript, key, 30_000, 0.5, '', 0, '0', '')],
    ['claim', 'maxAttempts', (key: string) => run(claimScript, key, 30_000, 600_000, '', 1.5, '0', '')],
    ['complete', 'retentionMs', (key: string, t: number) => run(completeScript, key, t, 1.5, '0', '')],
    ['release', 'retentionMs', (key: string, t: number) => run(releaseScript, key, t, 1.5)],
    ['release', 'neverStarted', (key: string, t: number) => run(releaseScript, key, t, 600_000, '0', 'yes')],
    ['fail', 'retentionMs', (key: string, t: number) => run(failScript, key, t, 1.5, 'E')],
    ['fail', 'abandoned', (key: string, t: number) => run(failScript, key, t, 600_000, 'E', 'yes')],
    ['extend', 'leaseMs', (key: string, t: number) => run(extendScript, key, t, 1.5, 600_000)],
    ['start', 'retentionMs', (key: string, t: number) => run(startScript, key, t, 30_000, 1.5)],
  ] as const)(
    '%s with a %s that is not a whole number (or a flag that is not 0/1) is refused and writes nothing',
    async (name, _arg, call) => {
      const key = `${prefix}:refused:${name}:${_arg}`;
      const [, token] = await claim(key, name === 'start' ? '1' : '0');
      const before = await redis.hgetall(key);
      await expect(call(key, token as number)).rejects.toThrow(`ERR idempotency ${name}: bad arguments`);
      expect(await redis.hgetall(key)).toEqual(before);
    },
  );
});
