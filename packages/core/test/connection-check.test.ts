import { EventEmitter } from 'node:events';
import type { Redis } from 'ioredis';
import { StoreUnavailableError } from '../src';
import { ConnectionCheck, wasNotSent } from '../src/store/connection-check';

/** The check of a stand-in client. */
const checkOf = (redis: object) => new ConnectionCheck(redis as Redis);

/** A stand-in ioredis client: a status, and the `ready` event. */
function client(status: string, extra: Record<string, unknown> = {}) {
  return Object.assign(new EventEmitter(), { status, isCluster: false, ...extra });
}

describe('ConnectionCheck: a command is sent only while the client is connected', () => {
  it.each(['reconnecting', 'close', 'end', 'connecting', 'connect'])(
    'a client that was ready and is %s now: refused, nothing sent',
    (status) => {
      const redis = client('ready');
      const check = checkOf(redis);
      expect(check.refusal()).toBeUndefined();
      redis.status = status;
      const refusal = check.refusal();
      expect(refusal).toBeInstanceOf(StoreUnavailableError);
      expect(refusal!.message).toMatch(/^Redis is not connected, nothing was sent/);
      expect(wasNotSent(refusal)).toBe(true);
      expect(wasNotSent(new StoreUnavailableError('Redis did not answer within 2000 ms'))).toBe(false);
    },
  );

  it.each(['wait', 'connecting', 'connect'])(
    'a client never ready yet (%s: lazyConnect, a first connection) is sent to: ioredis holds the command',
    (status) => {
      expect(checkOf(client(status)).refusal()).toBeUndefined();
    },
  );

  it('once it was ready (its ready event), a client connecting again is a reconnect: refused', () => {
    const redis = client('connecting');
    const check = checkOf(redis);
    redis.status = 'ready';
    redis.emit('ready');
    redis.status = 'connecting';
    expect(check.refusal()).toBeInstanceOf(StoreUnavailableError);
  });

  it('a first connection that failed and is retried (reconnecting) is refused', () => {
    expect(checkOf(client('reconnecting')).refusal()).toBeInstanceOf(StoreUnavailableError);
  });

  it('a stand-in client that reports no status is sent to', () => {
    expect(checkOf(client(undefined as unknown as string)).refusal()).toBeUndefined();
  });

  it("a Cluster: refused while the Cluster client is not connected, or the key's master connection is lost", () => {
    const master = { status: 'ready', options: { host: '127.0.0.1', port: 7000 } };
    const cluster = client('ready', {
      isCluster: true,
      slots: Array.from({ length: 16384 }, () => ['127.0.0.1:7000']),
      nodes: () => [master],
    });
    const check = checkOf(cluster);
    expect(check.refusal('key')).toBeUndefined();
    for (const status of ['reconnecting', 'close', 'end']) {
      master.status = status;
      expect(check.refusal('key')).toBeInstanceOf(StoreUnavailableError);
    }
    master.status = 'wait'; // not connected yet: ioredis opens it on first use
    expect(check.refusal('key')).toBeUndefined();
    cluster.status = 'reconnecting';
    expect(check.refusal('key')).toBeInstanceOf(StoreUnavailableError);
  });
});
