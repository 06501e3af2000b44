import { PassThrough } from 'node:stream';
import type { Redis } from 'ioredis';
import { RedisIdempotencyStore } from '../src';

const ACQUIRED = ['ACQUIRED', 1_795_527_009_752_001, 1, 1_795_527_039_752, 1_795_527_009_752, 1];
const CLAIM = { leaseMs: 30_000, retentionMs: 60_000 };

/**
 * A stand-in for an ioredis client: each script call is written to a real Node stream at once (as ioredis
 * writes a command), and the writes that reach the socket (`_write`, `_writev`) are counted. Replies wait
 * until the test calls `answerAll`.
 */
function fakeClient(options: { isCluster?: boolean; stream?: boolean } = {}) {
  const stream = new PassThrough();
  const writes: number[] = [];
  stream._writev = (chunks, callback) => {
    writes.push(chunks.length);
    callback();
  };
  stream._write = (_chunk, _encoding, callback) => {
    writes.push(1);
    callback();
  };
  const pending: ((reply: unknown) => void)[] = [];
  const call = (...args: unknown[]) => {
    stream.write(`${args.join(' ')}\n`);
    return new Promise((resolve) => pending.push(resolve));
  };
  const redis: Record<string, unknown> = {
    isCluster: options.isCluster ?? false,
    options: {},
    stream: options.stream === false ? undefined : stream,
    evalsha: call,
    // A Cluster's calls go through the commands the store defines (scripts.ts).
    defineCommand(name: string) {
      redis[name] = call;
    },
  };
  return {
    redis: redis as unknown as Redis,
    writes,
    stream,
    answerAll: () => {
      for (const resolve of pending.splice(0)) resolve(ACQUIRED);
    },
  };
}

const afterTick = () => new Promise<void>((resolve) => process.nextTick(resolve));

describe('RedisIdempotencyStore: which calls share a socket write (maxCommandsPerWrite)', () => {
  it('writes a call at once when none is in flight, and coalesces the calls made while one is', async () => {
    const client = fakeClient();
    const store = new RedisIdempotencyStore({ redis: client.redis }, { keyPrefix: 'w' });
    const first = store.claim({ scope: 's', key: 'k0' }, CLAIM);
    expect(client.writes).toEqual([1]); // nothing in flight: written at once
    const rest = Array.from({ length: 10 }, (_, i) => store.claim({ scope: 's', key: `k${i + 1}` }, CLAIM));
    expect(client.writes).toEqual([1, 8]); // eight per write while the first is in flight
    await afterTick();
    expect(client.writes).toEqual([1, 8, 2]); // the rest when the tick ends
    expect(client.stream.writableCorked).toBe(0);
    client.answerAll();
    await expect(Promise.all([first, ...rest])).resolves.toHaveLength(11);
    // Idle again: the next call is written at once.
    void store.claim({ scope: 's', key: 'k11' }, CLAIM);
    expect(client.writes).toEqual([1, 8, 2, 1]);
    client.answerAll();
  });

  it('maxCommandsPerWrite: 1 writes every call at once', async () => {
    const client = fakeClient();
    const store = new RedisIdempotencyStore(
      { redis: client.redis },
      { keyPrefix: 'w', maxCommandsPerWrite: 1 },
    );
    const claims = Array.from({ length: 5 }, (_, i) => store.claim({ scope: 's', key: `k${i}` }, CLAIM));
    expect(client.writes).toEqual([1, 1, 1, 1, 1]);
    client.answerAll();
    await Promise.all(claims);
  });

  it('does not coalesce on a Cluster client, nor on a client without a corkable socket', async () => {
    for (const client of [fakeClient({ isCluster: true }), fakeClient({ stream: false })]) {
      const store = new RedisIdempotencyStore({ redis: client.redis }, { keyPrefix: 'w' });
      const claims = Array.from({ length: 3 }, (_, i) => store.claim({ scope: 's', key: `k${i}` }, CLAIM));
      expect(client.writes).toEqual([1, 1, 1]);
      expect(client.stream.writableCorked).toBe(0);
      client.answerAll();
      await expect(Promise.all(claims)).resolves.toHaveLength(3);
    }
  });
});
