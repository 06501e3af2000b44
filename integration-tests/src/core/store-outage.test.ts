import { Idempotency, RedisIdempotencyStore, StoreUnavailableError } from '@idempotent-consumer/core';
import Redis from 'ioredis';
import { checkStoreAnswers } from '../../../packages/core/src/kit/store-check';
import { withClosedRedis } from '../../support/closed-redis';
import { waitFor } from '../../support/net';
import { RedisServer, usePrivateRedis } from '../../support/redis-server';
import { describeWithServices } from '../../support/service';

// Outages on a private redis-server this suite starts (so pausing or killing it disturbs no other suite).
describeWithServices(['redis'], 'store outage on a private redis-server', () => {
  const redisHandle = usePrivateRedis();

  const make = (options: ConstructorParameters<typeof Idempotency>[1] = {}) => {
    const store = new RedisIdempotencyStore(
      { redis: redisHandle.redis },
      { keyPrefix: 'outage', commandTimeoutMs: 300 },
    );
    const idempotency = new Idempotency({ store }, { leaseMs: 5_000, ...options });
    const events: string[] = [];
    for (const name of ['storeError', 'failOpen', 'completed', 'leaseLost'] as const) {
      idempotency.on(name, (p: { operation?: string }) =>
        events.push(p.operation ? `${name}:${p.operation}` : name),
      );
    }
    return { store, idempotency, events };
  };

  it('Redis down: run fails closed with StoreUnavailableError and runs nothing; fail-open runs unprotected', async () => {
    await redisHandle.server.stop();
    try {
      const closed = make();
      const handler = jest.fn(() => 'ran');
      const started = Date.now();
      const error = await closed.idempotency
        .run({ scope: 'o', key: 'down' }, handler)
        .catch((e: unknown) => e);
      expect(error).toBeInstanceOf(StoreUnavailableError);
      expect(error).toMatchObject({ code: 'STORE_UNAVAILABLE', retryable: true });
      expect(Date.now() - started).toBeLessThan(2_000);
      expect(handler).not.toHaveBeenCalled();
      expect(closed.events).toEqual(['storeError:claim']);

      const open = make({ storeFailureMode: 'open' });
      const result = await open.idempotency.run({ scope: 'o', key: 'down' }, handler);
      expect(result).toMatchObject({ outcome: 'UNPROTECTED', status: 'completed', result: 'ran' });
      expect(open.events).toEqual(['storeError:claim', 'failOpen']);
    } finally {
      await redisHandle.server.restart();
    }
    // The store sends nothing until its client has reconnected.
    await waitFor('the client to reconnect', () => redisHandle.redis.status === 'ready');
    await expect(make().idempotency.run({ scope: 'o', key: 'up-again' }, () => 1)).resolves.toMatchObject({
      outcome: 'ACQUIRED',
      status: 'completed',
    });
  });

  it('a command that times out says whether the client was connected: a slow server, or one it cannot reach', async () => {
    const { store } = make();
    const claim = (s: RedisIdempotencyStore) =>
      s.claim({ scope: 'o', key: 'slow' }, { leaseMs: 5_000, retentionMs: 60_000 }).catch((e: unknown) => e);
    await redisHandle.admin.client('PAUSE', 500, 'ALL');
    const slow = await claim(store);
    expect(slow).toBeInstanceOf(StoreUnavailableError);
    expect((slow as Error).message).toBe('Redis did not answer within 300 ms');
    await redisHandle.admin.ping(); // answered once the pause is over

    await withClosedRedis(async ({ redis }) => {
      const unreachable = await claim(new RedisIdempotencyStore({ redis }, { commandTimeoutMs: 300 }));
      expect(unreachable).toBeInstanceOf(StoreUnavailableError);
      // Before, the same message as for the slow server: nothing said the connection was refused.
      expect((unreachable as Error).message).toMatch(
        /^Redis did not answer within 300 ms \(the client was (not connected: it is reconnecting after the connection was refused or lost|still connecting to it)\)$/,
      );
    });
  });

  it('a complete that timed out during CLIENT PAUSE but was applied afterwards is recognised on retry', async () => {
    const { idempotency, store, events } = make();
    const id = { scope: 'o', key: 'paused-complete' };
    const result = await idempotency.run(id, async () => {
      // Every client is paused for 800 ms: the complete times out after 300 ms, stays queued on the
      // connection, and Redis runs it when the pause ends; the retry then finds COMPLETED with our token.
      await redisHandle.admin.client('PAUSE', 800, 'ALL');
      return 'charged';
    });
    expect(result).toMatchObject({
      outcome: 'ACQUIRED',
      status: 'completed',
      recorded: true,
      result: 'charged',
    });
    expect(events).toContain('storeError:complete');
    expect(events).not.toContain('leaseLost');
    expect(await store.get(id)).toMatchObject({
      state: 'COMPLETED',
      fencingToken: (result as { fencingToken: number }).fencingToken,
      result: 'j"charged"',
    });
    expect(await idempotency.run(id, () => 'again')).toMatchObject({
      outcome: 'DUPLICATE',
      result: 'charged',
    });
  });

  it('a Redis restart without persistence loses records: the write is refused as lease lost, never applied blind', async () => {
    const { idempotency, store } = make();
    const id = { scope: 'o', key: 'restart' };
    const result = await idempotency.run(id, async () => {
      await redisHandle.server.stop();
      await redisHandle.server.restart();
      return 'done';
    });
    expect(result).toMatchObject({ status: 'lease-lost', handlerCompleted: true, result: 'done' });
    expect(await store.get(id)).toBeNull();
  });
  it('a CONFLICT wait ends by conflictWaitMs while the subscriber connection cannot connect', async () => {
    // A server of its own: it is made to refuse every new connection (maxclients reached), so the
    // subscriber the first wait duplicates from the client keeps reconnecting and its SSUBSCRIBE is not
    // confirmed until the store gives up on it (subscribeTimeoutMs: 1000 ms). The wait's claims go through
    // the client, which is connected: the wait must end by its own bound (100 ms) plus one claim.
    const server = await RedisServer.start();
    const client = new Redis(server.url);
    const store = new RedisIdempotencyStore({ redis: client }, { keyPrefix: 'outage-sub' });
    const idempotency = new Idempotency({ store }, { leaseMs: 60_000, conflictWaitMs: 100 });
    try {
      const id = { scope: 'o', key: 'subscriber-down' };
      expect(await idempotency.claim(id)).toMatchObject({ outcome: 'ACQUIRED' });
      await client.config('SET', 'maxclients', '1');
      const handler = jest.fn();
      const started = performance.now();
      expect(await idempotency.run(id, handler)).toMatchObject({ outcome: 'CONFLICT' });
      // Before the fix the wait lasted until the subscription timed out: never less than 1000 ms.
      expect(performance.now() - started).toBeLessThan(1000);
      expect(handler).not.toHaveBeenCalled();
      // Let the subscriber connect before the store closes it: ioredis keeps a 2 s timer when it is
      // disconnected between two connection attempts (AbstractConnector.disconnect on a closed socket).
      await client.config('SET', 'maxclients', '10000');
      await waitFor('the subscriber to connect', async () => {
        const clients = (await client.client('LIST')) as string;
        return clients.trim().split('\n').length >= 2;
      });
    } finally {
      store.close();
      client.disconnect();
      await server.dispose();
    }
  });
  it('Redis full (maxmemory with noeviction, OOM): run fails closed, retryably, and ping rejects until Redis takes writes again (was a non-retryable UnexpectedReplyError, and a PING that answered let consumers resume)', async () => {
    const { store, idempotency, events } = make();
    const admin = redisHandle.admin;
    const handler = jest.fn(() => 'ran');
    // Below what the server already holds: every command that may grow memory is refused with OOM.
    await admin.config('SET', 'maxmemory-policy', 'noeviction');
    await admin.config('SET', 'maxmemory', '1');
    try {
      const error = await idempotency.run({ scope: 'o', key: 'full' }, handler).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(StoreUnavailableError);
      expect(error).toMatchObject({ code: 'STORE_UNAVAILABLE', retryable: true });
      expect((error as Error).message).toMatch(/maxmemory/);
      expect(handler).not.toHaveBeenCalled();
      expect(events).toEqual(['storeError:claim']);
      // A consumer that paused probes with ping before it resumes: a PING would answer.
      await expect(admin.ping()).resolves.toBe('PONG');
      await expect(store.ping()).rejects.toBeInstanceOf(StoreUnavailableError);
      // A consumer starting now says what is wrong, not to check a URL that is right.
      const atStart = await checkStoreAnswers(store, 'the test consumer').catch((e: unknown) => e);
      expect(atStart).toBeInstanceOf(StoreUnavailableError);
      expect((atStart as Error).message).toMatch(/cannot start: .* refused to take writes: .*OOM/);
      expect((atStart as Error).message).not.toMatch(/Check the Redis URL/);
    } finally {
      await admin.config('SET', 'maxmemory', '0');
    }
    await expect(store.ping()).resolves.toBeUndefined();
    await expect(idempotency.run({ scope: 'o', key: 'full' }, handler)).resolves.toMatchObject({
      outcome: 'ACQUIRED',
      status: 'completed',
    });
  });

  it('Redis unable to persist (MISCONF: a failed RDB save with stop-writes-on-bgsave-error): run fails closed, retryably, until Redis takes writes again (was a non-retryable UnexpectedReplyError)', async () => {
    // Its snapshots go to a directory nobody can create files in: the first BGSAVE fails, and Redis then
    // refuses every write (and PING) until a save succeeds or the option is turned off.
    const server = await RedisServer.start({ args: ['--dir', '/proc', '--save', '3600 1'] });
    const client = new Redis(server.url, { maxRetriesPerRequest: 1 });
    const store = new RedisIdempotencyStore({ redis: client }, { keyPrefix: 'outage-misconf' });
    const idempotency = new Idempotency({ store }, { leaseMs: 5_000 });
    const handler = jest.fn(() => 'ran');
    try {
      await client.bgsave();
      await waitFor('the RDB save to fail', async () =>
        /rdb_last_bgsave_status:err/.test(await client.info('persistence')),
      );
      const error = await idempotency.run({ scope: 'o', key: 'misconf' }, handler).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(StoreUnavailableError);
      expect(error).toMatchObject({ code: 'STORE_UNAVAILABLE', retryable: true });
      expect(handler).not.toHaveBeenCalled();
      await expect(store.ping()).rejects.toBeInstanceOf(StoreUnavailableError);
      await client.config('SET', 'stop-writes-on-bgsave-error', 'no');
      await expect(store.ping()).resolves.toBeUndefined();
      await expect(idempotency.run({ scope: 'o', key: 'misconf' }, handler)).resolves.toMatchObject({
        outcome: 'ACQUIRED',
        status: 'completed',
      });
    } finally {
      store.close();
      client.disconnect();
      await server.dispose();
    }
  });

  it('a server that refuses the write probe itself (an ACL user without EVAL): ping falls back to PING and answers', async () => {
    await redisHandle.admin.acl('SETUSER', 'no-eval', 'on', 'nopass', '~*', '&*', '+@all', '-eval');
    const client = new Redis(redisHandle.server.url, { username: 'no-eval' });
    const store = new RedisIdempotencyStore({ redis: client }, { keyPrefix: 'outage-acl' });
    try {
      await expect(client.eval('return 1', 0)).rejects.toThrow(/NOPERM/);
      await expect(store.ping()).resolves.toBeUndefined();
    } finally {
      store.close();
      client.disconnect();
      await redisHandle.admin.acl('DELUSER', 'no-eval');
    }
  });

  it('a read-only replica (a failover the client has not followed yet): ping rejects, as the claims do', async () => {
    const replica = await RedisServer.start({
      args: ['--replicaof', '127.0.0.1', String(redisHandle.server.port)],
    });
    const client = new Redis(replica.url);
    const store = new RedisIdempotencyStore({ redis: client }, { keyPrefix: 'outage-replica' });
    try {
      await expect(client.ping()).resolves.toBe('PONG');
      await expect(store.ping()).rejects.toMatchObject({ code: 'STORE_UNAVAILABLE' });
      await expect(
        store.claim({ scope: 'o', key: 'replica' }, { leaseMs: 1000, retentionMs: 1000 }),
      ).rejects.toMatchObject({
        code: 'STORE_UNAVAILABLE',
      });
    } finally {
      store.close();
      client.disconnect();
      await replica.dispose();
    }
  });
});
