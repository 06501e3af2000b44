import { EventEmitter } from 'node:events';
import {
  Idempotency,
  type IdempotencyLogger,
  MemoryIdempotencyStore,
  StoreUnavailableError,
} from '@idempotent-consumer/core';
import { AdapterLog, StoreGate } from '@idempotent-consumer/core/kit';
import { checkStoreAnswers, watchRedisErrors } from '../../src/kit/store-check';
import { UnprotectedRuns } from '../../src/kit/unprotected-runs';
import { FaultyStore } from '../support/faulty-store';

function recordingLogger() {
  const lines: { level: string; message: string }[] = [];
  const logger: IdempotencyLogger = {
    warn: (message) => lines.push({ level: 'warn', message }),
    error: (message) => lines.push({ level: 'error', message }),
    info: (message) => lines.push({ level: 'info', message }),
  };
  return { lines, logger };
}

/** A Redis-client stand-in: an EventEmitter with ioredis' `options`. */
class FakeRedis extends EventEmitter {
  readonly options = { host: '127.0.0.1', port: 1 };
}

describe('kit: AdapterLog', () => {
  it('attaches to the runner from open() to close(), only when the runner logs elsewhere', () => {
    const { lines, logger } = recordingLogger();
    const silentRunner = new Idempotency({ store: new MemoryIdempotencyStore(), logger: false });
    const log = AdapterLog.for(silentRunner, logger, 'the consumer of queue q');
    silentRunner.emit('leaseLost', { scope: 's', key: 'k', fencingToken: 1, during: 'heartbeat' });
    expect(lines).toEqual([]); // built, not opened: nothing attached
    log.open();
    silentRunner.emit('leaseLost', { scope: 's', key: 'k', fencingToken: 1, during: 'heartbeat' });
    expect(lines.map((l) => l.message)).toEqual([expect.stringContaining('lease lost on key "k"')]);
    log.close();
    silentRunner.emit('leaseLost', { scope: 's', key: 'k', fencingToken: 1, during: 'heartbeat' });
    expect(lines).toHaveLength(1);

    const sameRunner = new Idempotency({ store: new MemoryIdempotencyStore(), logger });
    AdapterLog.for(sameRunner, logger, 'x').open();
    sameRunner.emit('resultOmitted', { scope: 's', key: 'k', bytes: 10, maxResultBytes: 1 });
    expect(lines).toHaveLength(2); // the runner's own line, not a second one
  });

  it('consumers sharing a runner and a logger attach it once; it is detached when the last one closes', () => {
    const { lines, logger } = recordingLogger();
    const runner = new Idempotency({ store: new MemoryIdempotencyStore(), logger: false });
    const leaseLost = () =>
      runner.emit('leaseLost', { scope: 's', key: 'k', fencingToken: 1, during: 'heartbeat' });
    const logs = [1, 2, 3].map((n) => AdapterLog.for(runner, logger, `the consumer of queue q${n}`));
    for (const log of logs) log.open();
    logs[0]!.open(); // a second open of one log changes nothing
    leaseLost();
    expect(lines).toHaveLength(1);
    logs[0]!.close();
    logs[0]!.close(); // a second close does not release another consumer's use
    leaseLost();
    expect(lines).toHaveLength(2);
    logs[1]!.close();
    logs[2]!.close();
    leaseLost();
    expect(lines).toHaveLength(2);
    expect(runner.listenerCount('leaseLost')).toBe(0);
    // Opened again (a restarted poller): attached again, once.
    logs[1]!.open();
    leaseLost();
    expect(lines).toHaveLength(3);
    logs[1]!.close();
  });

  it('warnOnce logs a topic once; a logger that throws changes nothing', () => {
    const { lines, logger } = recordingLogger();
    const log = AdapterLog.for(new Idempotency({ store: new MemoryIdempotencyStore(), logger }), logger, 'c');
    expect(log.warnOnce('missing-key', 'no key')).toBe(true);
    expect(log.warnOnce('missing-key', 'no key')).toBe(false);
    expect(lines).toEqual([{ level: 'warn', message: 'idempotent-consumer: no key' }]);
    const throwing = AdapterLog.for(
      new Idempotency({ store: new MemoryIdempotencyStore(), logger: false }),
      {
        warn: () => {
          throw new Error('logger down');
        },
        error: () => {},
      },
      'c',
    );
    expect(() => throwing.warn('x')).not.toThrow();
  });

  it('StoreGate with a log writes its pause and resume at debug only, once each, however many closes', async () => {
    const { lines, logger } = recordingLogger();
    const debugged: string[] = [];
    const log = AdapterLog.for(
      new Idempotency({ store: new MemoryIdempotencyStore(), logger: false }),
      { ...logger, debug: (message) => debugged.push(message) },
      'the consumer of queue q',
    );
    let down = true;
    const gate = new StoreGate(
      { ping: async () => (down ? Promise.reject(new StoreUnavailableError('down')) : undefined) },
      { storeProbeBackoff: { baseMs: 2, maxMs: 2, jitter: 'none' }, log },
    );
    gate.close(new StoreUnavailableError('down'));
    gate.close(new StoreUnavailableError('down'));
    const open = gate.waitUntilOpen();
    await new Promise((r) => setTimeout(r, 20));
    down = false;
    expect(await open).toBe(true);
    expect(lines).toEqual([]);
    expect(debugged.map((m) => m.split(':')[1]!.trim())).toEqual([
      'the consumer of queue q pauses',
      'the consumer of queue q resumes',
    ]);
    gate.dispose();
  });

  it('one store outage logs one warning and one recovery line across the runner, the gate and the Redis watcher', async () => {
    const { lines, logger } = recordingLogger();
    const store = Object.assign(new FaultyStore(new MemoryIdempotencyStore()), { redis: new FakeRedis() });
    const runner = new Idempotency({ store, logger: false });
    const log = AdapterLog.for(runner, logger, 'the consumer of queue q');
    log.open();
    const unwatch = watchRedisErrors(store, log);
    const gate = new StoreGate(store, { storeProbeBackoff: { baseMs: 2, maxMs: 2, jitter: 'none' }, log });
    const unavailable = () => new StoreUnavailableError('Redis is unavailable: ECONNREFUSED');
    store.breakAlways('claim', unavailable).breakAlways('ping', unavailable);

    store.redis.emit('error', new Error('ECONNREFUSED')); // the client notices first
    for (let i = 0; i < 3; i++) {
      const error = await runner.run({ scope: 's', key: `k${i}` }, async () => 'ok').catch((e: unknown) => e);
      expect(error).toBeInstanceOf(StoreUnavailableError);
      gate.close(error); // what an adapter does with it
      store.redis.emit('error', new Error('ECONNREFUSED'));
    }
    const open = gate.waitUntilOpen();
    store.heal();
    store.redis.emit('ready');
    expect(await open).toBe(true);
    await runner.run({ scope: 's', key: 'after' }, async () => 'ok');

    expect(lines.map((l) => `${l.level} ${l.message}`)).toEqual([
      expect.stringMatching(/^warn idempotent-consumer: the idempotency store is unavailable/),
      expect.stringMatching(
        /^info idempotent-consumer: the idempotency store answers again after \d+ ms \(3 failed calls\)/,
      ),
    ]);
    gate.dispose();
    unwatch();
    log.close();
  });
});

describe('kit: checkStoreAnswers and watchRedisErrors', () => {
  it('checkStoreAnswers throws a StoreUnavailableError naming the consumer and where Redis is', async () => {
    const store = Object.assign(new MemoryIdempotencyStore(), { redis: new FakeRedis() });
    store.ping = async () => {
      throw new StoreUnavailableError('connect ECONNREFUSED 127.0.0.1:1');
    };
    const error = await checkStoreAnswers(store, 'the consumer of queue q').catch((e: unknown) => e);
    expect(error).toBeInstanceOf(StoreUnavailableError);
    expect((error as Error).message).toContain('the consumer of queue q cannot start');
    expect((error as Error).message).toContain('Redis at 127.0.0.1:1');
    await expect(checkStoreAnswers(new MemoryIdempotencyStore(), 'c')).resolves.toBeUndefined();
  });

  it('checkStoreAnswers waits for a client that is still connecting before its PING (enableOfflineQueue: false refuses one sent earlier)', async () => {
    const redis = Object.assign(new FakeRedis(), { status: 'connecting' });
    const store = Object.assign(new MemoryIdempotencyStore(), { redis });
    store.ping = async () => {
      if (redis.status !== 'ready') throw new StoreUnavailableError("Stream isn't writeable");
    };
    const checked = checkStoreAnswers(store, 'c');
    expect(redis.listenerCount('ready')).toBe(1);
    redis.status = 'ready';
    redis.emit('ready');
    await expect(checked).resolves.toBeUndefined();
    expect(redis.listenerCount('ready')).toBe(0);
    expect(redis.listenerCount('error')).toBe(0);
  });

  it('checkStoreAnswers ends the wait for a connecting client when its signal aborts, and sends no PING then', async () => {
    const redis = Object.assign(new FakeRedis(), { status: 'connect' }); // connected, ready check unanswered
    const store = Object.assign(new MemoryIdempotencyStore(), { redis });
    let pings = 0;
    store.ping = async () => {
      pings++;
    };
    const stopping = new AbortController();
    let settled = false;
    const checked = checkStoreAnswers(store, 'c', stopping.signal).finally(() => {
      settled = true;
    });
    stopping.abort();
    // One macrotask is plenty for an ended wait; without the abort it lasts its whole 5 s.
    await new Promise((resolve) => setImmediate(resolve));
    expect(settled).toBe(true);
    await expect(checked).resolves.toBeUndefined();
    expect(pings).toBe(0);
    expect(redis.listenerCount('ready')).toBe(0);
  });

  it('checkStoreAnswers does not wait for a client that failed to connect: the PING says why', async () => {
    const redis = Object.assign(new FakeRedis(), { status: 'connecting' });
    const store = Object.assign(new MemoryIdempotencyStore(), { redis });
    store.ping = async () => {
      throw new StoreUnavailableError('connect ECONNREFUSED 127.0.0.1:1');
    };
    const checked = checkStoreAnswers(store, 'c').catch((e: unknown) => e);
    redis.emit('error', new Error('connect ECONNREFUSED 127.0.0.1:1'));
    expect(await checked).toBeInstanceOf(StoreUnavailableError);
  });

  it('watchRedisErrors logs the first error of each outage at debug through one listener, and leaves an owned client alone', () => {
    const { lines, logger: base } = recordingLogger();
    const logger: IdempotencyLogger = {
      ...base,
      debug: (message) => lines.push({ level: 'debug', message }),
    };
    const log = AdapterLog.for(new Idempotency({ store: new MemoryIdempotencyStore(), logger }), logger, 'c');
    const redis = new FakeRedis();
    const store = { redis };
    const stopA = watchRedisErrors(store, log);
    const stopB = watchRedisErrors(store, log);
    expect(redis.listenerCount('error')).toBe(1);
    for (let i = 0; i < 5; i++) redis.emit('error', new Error('ECONNREFUSED'));
    redis.emit('ready');
    redis.emit('error', new Error('ECONNRESET'));
    expect(lines).toEqual([
      { level: 'debug', message: expect.stringContaining('ECONNREFUSED') },
      { level: 'debug', message: expect.stringContaining('ECONNRESET') },
    ]);
    stopA();
    expect(redis.listenerCount('error')).toBe(1);
    stopB();
    expect(redis.listenerCount('error')).toBe(0);

    const owned = new FakeRedis();
    owned.on('error', () => {});
    watchRedisErrors({ redis: owned }, log);
    expect(owned.listenerCount('error')).toBe(1);
  });
});

it("watchRedisErrors logs through a watching consumer whose logger logs, not the first one's `false`", () => {
  const runner = new Idempotency({ store: new MemoryIdempotencyStore(), logger: false });
  const debugged: string[] = [];
  const quiet = AdapterLog.for(runner, false, 'the consumer of queue quiet');
  const loud = AdapterLog.for(
    runner,
    { warn: () => {}, error: () => {}, debug: (message) => debugged.push(message) },
    'the consumer of queue loud',
  );
  const redis = new FakeRedis();
  const stopQuiet = watchRedisErrors({ redis }, quiet);
  const stopLoud = watchRedisErrors({ redis }, loud);
  redis.emit('error', new Error('ECONNREFUSED'));
  expect(debugged).toEqual([expect.stringContaining('ECONNREFUSED')]);
  expect(debugged[0]).toContain('127.0.0.1:1');
  stopQuiet();
  stopLoud();
});

describe('kit: UnprotectedRuns', () => {
  it('counts runs into the attempt, holds a decision, and forgets the oldest past its bound', () => {
    const runs = new UnprotectedRuns<string>(2);
    expect(runs.attemptOf('a', 2)).toBe(3);
    runs.ran('a');
    runs.ran('a');
    expect(runs.attemptOf('a', 2)).toBe(5);
    runs.hold('a', 'dead-letter');
    expect(runs.get('a')).toEqual({ runs: 2, held: 'dead-letter' });
    runs.ran('b');
    runs.ran('c'); // over the bound: 'a' is forgotten
    expect(runs.get('a')).toBeUndefined();
    expect(runs.size).toBe(2);
    runs.forget('b');
    expect(runs.get('b')).toBeUndefined();
  });
});
