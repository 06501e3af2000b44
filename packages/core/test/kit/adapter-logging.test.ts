import { EventEmitter } from 'node:events';
import {
  Idempotency,
  type IdempotencyLogger,
  MemoryIdempotencyStore,
  StoreUnavailableError,
} from '@idempotent-consumer/core';
import {
  AdapterLog,
  checkStoreAnswers,
  StoreGate,
  UnprotectedRuns,
  watchRedisErrors,
} from '@idempotent-consumer/core/kit';

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
  it("attaches to the runner only when the runner logs elsewhere, so the runner's warnings are logged once", () => {
    const { lines, logger } = recordingLogger();
    const silentRunner = new Idempotency({ store: new MemoryIdempotencyStore(), logger: false });
    const log = AdapterLog.for(silentRunner, logger, 'the consumer of queue q');
    silentRunner.emit('leaseLost', { scope: 's', key: 'k', fencingToken: 1, during: 'heartbeat' });
    expect(lines.map((l) => l.message)).toEqual([expect.stringContaining('lease lost on key "k"')]);
    log.close();
    silentRunner.emit('leaseLost', { scope: 's', key: 'k', fencingToken: 1, during: 'heartbeat' });
    expect(lines).toHaveLength(1);

    const sameRunner = new Idempotency({ store: new MemoryIdempotencyStore(), logger });
    AdapterLog.for(sameRunner, logger, 'x');
    sameRunner.emit('resultOmitted', { scope: 's', key: 'k', bytes: 10, maxResultBytes: 1 });
    expect(lines).toHaveLength(2); // the runner's own line, not a second one
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

  it('StoreGate with a log warns once when it closes and once when it opens, however many closes', async () => {
    const { lines, logger } = recordingLogger();
    const log = AdapterLog.for(
      new Idempotency({ store: new MemoryIdempotencyStore(), logger }),
      logger,
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
    expect(lines.map((l) => `${l.level} ${l.message.split(':')[1]!.trim()}`)).toEqual([
      'warn the consumer of queue q pauses',
      'info the consumer of queue q resumes',
    ]);
    gate.dispose();
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

  it('watchRedisErrors logs the first error of each outage through one listener, and leaves an owned client alone', () => {
    const { lines, logger } = recordingLogger();
    const log = AdapterLog.for(new Idempotency({ store: new MemoryIdempotencyStore(), logger }), logger, 'c');
    const redis = new FakeRedis();
    const store = { redis };
    const stopA = watchRedisErrors(store, log);
    const stopB = watchRedisErrors(store, log);
    expect(redis.listenerCount('error')).toBe(1);
    for (let i = 0; i < 5; i++) redis.emit('error', new Error('ECONNREFUSED'));
    redis.emit('ready');
    redis.emit('error', new Error('ECONNRESET'));
    expect(lines.map((l) => l.message)).toEqual([
      expect.stringContaining('ECONNREFUSED'),
      expect.stringContaining('ECONNRESET'),
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
