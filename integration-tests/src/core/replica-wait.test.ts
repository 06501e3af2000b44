import {
  Idempotency,
  RedisIdempotencyStore,
  ReplicationTimeoutError,
  StoreUnavailableError,
} from '@idempotent-consumer/core';
import Redis, { Cluster } from 'ioredis';
import { waitFor } from '../../support/net';
import { describeWithPrograms } from '../../support/programs';
import { describeWithRedisCluster, RedisCluster } from '../../support/redis-cluster';
import { RedisServer } from '../../support/redis-server';

// waitForReplicas on a primary and a replica this suite starts (`redis-server --replicaof`): every write that
// matters is on the replica when the store call resolves, and a write that fewer replicas acknowledged than
// required rejects with REPLICATION_TIMEOUT (after it was applied on the primary).
describeWithPrograms(
  ['redis-server'],
  'RedisIdempotencyStore waitForReplicas on a primary + replica it starts',
  () => {
    let primary: RedisServer;
    let replica: RedisServer;
    let client: Redis;
    let replicaClient: Redis;
    const prefix = `replica-wait-${process.pid}`;

    beforeAll(async () => {
      primary = await RedisServer.start();
      replica = await RedisServer.start({ args: ['--replicaof', '127.0.0.1', String(primary.port)] });
      client = new Redis(primary.url, { enableAutoPipelining: true });
      replicaClient = new Redis(replica.url);
      await waitFor(
        'the replica to be in sync',
        async () => /master_link_status:up/.test(await replicaClient.info('replication')),
        20_000,
      );
    }, 60_000);

    afterAll(async () => {
      client?.disconnect();
      replicaClient?.disconnect();
      await replica?.dispose();
      await primary?.dispose();
    });

    it('claim, complete, release and fail resolve only once the replica has the write', async () => {
      const store = new RedisIdempotencyStore(
        { redis: client },
        { keyPrefix: prefix, waitForReplicas: { replicas: 1, timeoutMs: 1000 } },
      );
      const idempotency = new Idempotency({ store }, { leaseMs: 60_000, maxAttempts: 2 });
      const onReplica = async (key: string) =>
        (await replicaClient.hget(store.recordKey({ scope: 's', key }), 's')) ?? null;

      for (let i = 0; i < 20; i++) {
        const r = await idempotency.run({ scope: 's', key: `k-${i}` }, () => i);
        expect(r).toMatchObject({ status: 'completed', recorded: true });
        // Read from the replica right after: WAIT guaranteed it had the COMPLETED write.
        expect(await onReplica(`k-${i}`)).toBe('C');
      }
      const claim = await store.claim({ scope: 's', key: 'held' }, { leaseMs: 60_000, retentionMs: 60_000 });
      expect(await onReplica('held')).toBe('P');
      await store.release({ scope: 's', key: 'held' }, claim.fencingToken, { retentionMs: 60_000 });
      expect(await onReplica('held')).toBe('R');
      const again = await store.claim({ scope: 's', key: 'held' }, { leaseMs: 60_000, retentionMs: 60_000 });
      await store.fail({ scope: 's', key: 'held' }, again.fencingToken, { retentionMs: 60_000, error: 'E' });
      expect(await onReplica('held')).toBe('F');
    });

    it('more replicas than acknowledge: REPLICATION_TIMEOUT, the claim written on the primary given back unrun (it was left IN_PROGRESS: CONFLICT until its lease lapsed)', async () => {
      const store = new RedisIdempotencyStore(
        { redis: client },
        { keyPrefix: prefix, waitForReplicas: { replicas: 2, timeoutMs: 200 } },
      );
      const error = await store
        .claim({ scope: 's', key: 'two-replicas' }, { leaseMs: 60_000, retentionMs: 60_000 })
        .catch((e: unknown) => e);
      expect(error).toBeInstanceOf(ReplicationTimeoutError);
      expect(error).toMatchObject({
        code: 'REPLICATION_TIMEOUT',
        retryable: true,
        acknowledgedReplicas: 1,
        requiredReplicas: 2,
      });
      expect(await store.get({ scope: 's', key: 'two-replicas' })).toMatchObject({
        state: 'RELEASED',
        attempt: 0,
      });
      // A duplicate's claim writes nothing, so it does not wait.
      await client.hset(store.recordKey({ scope: 's', key: 'done' }), {
        s: 'C',
        t: 1,
        a: 1,
        h: 0,
        u: 1,
        c: 1,
      });
      await expect(
        store.claim({ scope: 's', key: 'done' }, { leaseMs: 1000, retentionMs: 1000 }),
      ).resolves.toMatchObject({
        outcome: 'DUPLICATE',
      });
    });

    it('a claim its replicas did not acknowledge spends no attempt: more such claims than maxAttempts, then the handler runs as attempt 1', async () => {
      // Two replicas cannot be had: every claim that takes the record rejects with REPLICATION_TIMEOUT and
      // its handler does not run (what a failover does to the claims made before the new primary has its
      // replica back). Counted at once, the third such claim would have failed the record unrun.
      const unacknowledged = new RedisIdempotencyStore(
        { redis: client },
        { keyPrefix: prefix, waitForReplicas: { replicas: 2, timeoutMs: 100 } },
      );
      const id = { scope: 's', key: 'unacknowledged-claims' };
      const options = { leaseMs: 150, retentionMs: 60_000, maxAttempts: 2 };
      for (let i = 0; i < 4; i++) {
        // The previous claim was given back: the claim takes the record again (CONFLICT only if its
        // give-back failed, until its lease lapsed).
        let error: unknown;
        await waitFor(
          'a claim that takes the record',
          async () => {
            const reply = await unacknowledged.claim(id, options).catch((e: unknown) => e);
            if (reply instanceof Error) error = reply;
            else expect(reply).toMatchObject({ outcome: 'CONFLICT' });
            return error !== undefined;
          },
          10_000,
          20,
        );
        expect(error).toMatchObject({ code: 'REPLICATION_TIMEOUT', acknowledgedReplicas: 1 });
        // Given back unrun: the next claim may take the key at once.
        expect(await unacknowledged.get(id)).toMatchObject({ state: 'RELEASED', attempt: 0 });
      }
      // With its replica's acknowledgement the handler runs, as the first attempt of a clean claim.
      const store = new RedisIdempotencyStore(
        { redis: client },
        { keyPrefix: prefix, waitForReplicas: { replicas: 1, timeoutMs: 1000 } },
      );
      const idempotency = new Idempotency({ store, logger: false }, { leaseMs: 150, maxAttempts: 2 });
      let result: Awaited<ReturnType<typeof idempotency.run>> | undefined;
      await waitFor('a run that is not a CONFLICT', async () => {
        result = await idempotency.run(id, ({ attempt, outcome }) => ({ attempt, outcome }));
        return result.outcome !== 'CONFLICT';
      });
      expect(result).toMatchObject({
        outcome: 'ACQUIRED',
        status: 'completed',
        recorded: true,
        result: { attempt: 1, outcome: 'ACQUIRED' },
      });
      expect(await replicaClient.hget(store.recordKey(id), 's')).toBe('C');
    });

    it("storeFailureMode 'open': a claim written whose WAIT went unanswered runs the handler unprotected, and the next claim is ACQUIRED_STALE (was ACQUIRED: not told an earlier run may have happened)", async () => {
      const id = { scope: 's', key: 'fail-open-unanswered-wait' };
      // The store's own connection is cut while its claim's WAIT is pending (cutWhileWaiting, below).
      const settled = await cutWhileWaiting(
        (store) => store.recordKey(id),
        (store) =>
          new Idempotency(
            { store, logger: false },
            { leaseMs: 500, storeFailureMode: 'open', writeAttempts: 3 },
          ).run(id, async ({ outcome }) => outcome),
      );
      expect(settled).toMatchObject({
        resolved: { outcome: 'UNPROTECTED', status: 'completed', result: 'UNPROTECTED' },
      });

      // The next delivery, once the store answers: its handler is told an earlier run may have happened.
      const next = new Idempotency(
        {
          store: new RedisIdempotencyStore(
            { redis: client },
            { keyPrefix: prefix, waitForReplicas: { replicas: 1, timeoutMs: 1000 } },
          ),
          logger: false,
        },
        { leaseMs: 500 },
      );
      let result: Awaited<ReturnType<typeof next.run<string>>> | undefined;
      await waitFor('a run that is not a CONFLICT', async () => {
        result = await next.run(id, ({ outcome }) => outcome);
        return result.outcome !== 'CONFLICT';
      });
      expect(result).toMatchObject({
        outcome: 'ACQUIRED_STALE',
        status: 'completed',
        result: 'ACQUIRED_STALE',
      });
    });

    /**
     * Runs `call` on a store of its own connection with `waitForReplicas` (10 s), and cuts that connection
     * (`CLIENT KILL`) once `written` (a record key) is IN_PROGRESS on the primary, with a fencing token above
     * `tokenAbove` (another holder's), and the replica is frozen: the `WAIT` pending then fails at once
     * (maxRetriesPerRequest 0: not resent), as an unanswered one does, and the connection reconnects, unless
     * `reconnect` is false: then every later command on it (the give-back of the claim) fails too. A store
     * sends nothing while its client is not connected: a release it could not send then (the give-back of
     * the claim) it owes, and sends once the connection is back; the connection is kept until it did.
     * Resolves with what `call` rejected with, or `{ resolved }` with what it resolved to.
     */
    async function cutWhileWaiting(
      written: (store: RedisIdempotencyStore) => string,
      call: (store: RedisIdempotencyStore) => Promise<unknown>,
      { tokenAbove = 0, reconnect = true }: { tokenAbove?: number; reconnect?: boolean } = {},
    ): Promise<unknown> {
      const own = new Redis(primary.url, {
        maxRetriesPerRequest: 0,
        ...(reconnect ? {} : { retryStrategy: () => null }),
      });
      try {
        const ownId = String(await own.client('ID'));
        const store = new RedisIdempotencyStore(
          { redis: own },
          {
            keyPrefix: prefix,
            waitForReplicas: { replicas: 1, timeoutMs: 10_000 },
            commandTimeoutMs: 15_000,
          },
        );
        replica.freeze(); // acknowledges nothing: the WAIT blocks (up to 10 s)
        let settled: Promise<unknown>;
        try {
          settled = call(store).then(
            (value) => ({ resolved: value }),
            (error: unknown) => error,
          );
          await waitFor('the claim written on the primary', async () => {
            const [state, token] = await client.hmget(written(store), 's', 't');
            return state === 'P' && Number(token) > tokenAbove;
          });
          await client.client('KILL', 'ID', ownId);
        } finally {
          replica.resume();
        }
        const outcome = await settled;
        if (reconnect) await waitFor('the releases the store owes', () => store.pendingReleases === 0);
        return outcome;
      } finally {
        own.disconnect();
      }
    }

    it('claimMany whose WAIT its replica does not acknowledge: rejects with REPLICATION_TIMEOUT and gives back every claim it wrote, unrun (they were left IN_PROGRESS: CONFLICT until their lease lapsed)', async () => {
      const unacknowledged = new RedisIdempotencyStore(
        { redis: client },
        { keyPrefix: prefix, waitForReplicas: { replicas: 1, timeoutMs: 200 } },
      );
      const store = new RedisIdempotencyStore(
        { redis: client },
        { keyPrefix: prefix, waitForReplicas: { replicas: 1, timeoutMs: 5000 }, commandTimeoutMs: 10_000 },
      );
      const options = { leaseMs: 60_000, retentionMs: 60_000, maxAttempts: 2 };
      for (const reserve of [false, true]) {
        const ids = [0, 1, 2].map((i) => ({ scope: 's', key: `many-unacknowledged-${reserve}-${i}` }));
        replica.freeze();
        let error: unknown;
        try {
          error = await unacknowledged
            .claimMany(ids.map((id) => ({ id, options: { ...options, reserve } })))
            .catch((e: unknown) => e);
        } finally {
          replica.resume();
        }
        expect(error).toMatchObject({ code: 'REPLICATION_TIMEOUT', acknowledgedReplicas: 0 });
        for (const id of ids) {
          expect(await store.get(id)).toMatchObject({ state: 'RELEASED', attempt: 0, abandoned: false });
        }
        // The redelivered batch claims every key at once, none with an attempt spent.
        const again = await store.claimMany(ids.map((id) => ({ id, options })));
        expect(again.map((r) => [r.outcome, r.attempt])).toEqual(ids.map(() => ['ACQUIRED', 1]));
      }
    });

    it('claimMany whose WAIT goes unanswered: rejects with STORE_UNAVAILABLE naming no written claim, and gives back every claim it wrote, unrun', async () => {
      const ids = [0, 1, 2].map((i) => ({ scope: 's', key: `many-unanswered-${i}` }));
      const options = { leaseMs: 60_000, retentionMs: 60_000, maxAttempts: 2 };
      const error = await cutWhileWaiting(
        (store) => store.recordKey(ids[2]!),
        (store) => store.claimMany(ids.map((id) => ({ id, options }))),
      );
      expect(error).toBeInstanceOf(StoreUnavailableError);
      expect((error as StoreUnavailableError).writtenClaim).toBeUndefined();
      const store = new RedisIdempotencyStore({ redis: client }, { keyPrefix: prefix });
      for (const id of ids) expect(await store.get(id)).toMatchObject({ state: 'RELEASED', attempt: 0 });
      const again = await store.claimMany(ids.map((id) => ({ id, options })));
      expect(again.map((r) => [r.outcome, r.attempt])).toEqual(ids.map(() => ['ACQUIRED', 1]));
    });

    it("storeFailureMode 'closed': a claim written whose WAIT went unanswered is given back unrun before run rejects (it was left IN_PROGRESS: CONFLICT until its lease lapsed)", async () => {
      const id = { scope: 's', key: 'closed-unanswered-wait' };
      let ran = false;
      const error = await cutWhileWaiting(
        (store) => store.recordKey(id),
        (store) =>
          new Idempotency({ store, logger: false }, { leaseMs: 60_000, maxAttempts: 2 }).run(id, () => {
            ran = true;
          }),
      );
      expect(error).toMatchObject({ code: 'STORE_UNAVAILABLE' });
      expect(ran).toBe(false);
      const store = new RedisIdempotencyStore({ redis: client }, { keyPrefix: prefix });
      expect(await store.get(id)).toMatchObject({ state: 'RELEASED', attempt: 0 });
      expect(await store.claim(id, { leaseMs: 60_000, retentionMs: 60_000, maxAttempts: 2 })).toMatchObject({
        outcome: 'ACQUIRED',
        attempt: 1,
      });
    });

    it.each(['closed', 'open'] as const)(
      "storeFailureMode '%s': the holder releases during a conflict wait, the claim the wait then wrote has its WAIT unanswered and its give-back too: run rejects naming it, nothing runs, and it can be given back (run resolved the CONFLICT it had: the key held until the claim's lease lapsed)",
      async (storeFailureMode) => {
        const id = { scope: 's', key: `conflict-wait-written-${storeFailureMode}` };
        const options = { leaseMs: 60_000, retentionMs: 60_000, maxAttempts: 3 };
        const plain = new RedisIdempotencyStore({ redis: client }, { keyPrefix: prefix });
        const holder = await plain.claim(id, options);
        if (holder.outcome !== 'ACQUIRED') throw new Error(holder.outcome);
        let ran = false;
        let failOpen = false;
        const error = await cutWhileWaiting(
          (store) => store.recordKey(id),
          (store) => {
            const waiter = new Idempotency(
              { store, logger: false },
              { ...options, conflictWaitMs: 10_000, storeFailureMode },
            );
            waiter.on('failOpen', () => {
              failOpen = true;
            });
            // The holder gives its claim back once the waiter met it (CONFLICT) and waits.
            waiter.once('outcome', ({ outcome }) => {
              if (outcome === 'CONFLICT') void plain.release(id, holder.fencingToken, options);
            });
            return waiter.run(id, () => {
              ran = true;
            });
          },
          { tokenAbove: holder.fencingToken, reconnect: false },
        );
        expect(error).toBeInstanceOf(StoreUnavailableError);
        const record = await plain.get(id);
        expect(record).toMatchObject({ state: 'IN_PROGRESS', reserved: true, attempt: 1 });
        const written = (error as StoreUnavailableError).writtenClaim;
        expect(written).toEqual({
          kind: 'written-claim',
          fencingToken: record!.fencingToken,
          outcome: 'ACQUIRED',
        });
        expect([ran, failOpen]).toEqual([false, false]);
        // Given back (as the adapters do, through the kit's giveBackUnrun), the key is claimable at once.
        const runner = new Idempotency({ store: plain, logger: false }, options);
        expect(await runner.release(id, written!)).toBe(true);
        expect(await runner.run(id, ({ outcome, attempt }) => ({ outcome, attempt }))).toMatchObject({
          status: 'completed',
          result: { outcome: 'ACQUIRED', attempt: 2 },
        });
      },
    );

    it('a replica that stopped answering: the complete rejects with REPLICATION_TIMEOUT instead of resolving', async () => {
      const store = new RedisIdempotencyStore(
        { redis: client },
        { keyPrefix: prefix, waitForReplicas: { replicas: 1, timeoutMs: 300 } },
      );
      const id = { scope: 's', key: 'replica-down' };
      const claim = await store.claim(id, { leaseMs: 60_000, retentionMs: 60_000 });
      await replica.stop();
      await waitFor(
        'the primary to see no replica',
        async () => /connected_slaves:0/.test(await client.info('replication')),
        20_000,
      );
      await expect(store.complete(id, claim.fencingToken, { retentionMs: 60_000 })).rejects.toMatchObject({
        code: 'REPLICATION_TIMEOUT',
        acknowledgedReplicas: 0,
      });
      expect(await store.get(id)).toMatchObject({ state: 'COMPLETED' });
    });

    it('rejects bad options with InvalidOptionError', () => {
      const make =
        (waitForReplicas: { replicas: number; timeoutMs: number }, commandTimeoutMs?: number) => () =>
          new RedisIdempotencyStore({ redis: client }, { waitForReplicas, commandTimeoutMs });
      expect(make({ replicas: 0, timeoutMs: 100 })).toThrow(/replicas must be an integer >= 1/);
      expect(make({ replicas: 1, timeoutMs: 0 })).toThrow(/timeoutMs must be an integer >= 1/);
      expect(make({ replicas: 1, timeoutMs: 2000 }, 2000)).toThrow(/below commandTimeoutMs/);
    });
  },
);

// In a Cluster, WAIT must go to the connection that wrote the key (its slot's master), not a random node.
describeWithRedisCluster(
  'RedisIdempotencyStore waitForReplicas on a local Redis Cluster (3 masters + 3 replicas)',
  () => {
    let cluster: RedisCluster;
    let redis: Cluster;

    beforeAll(async () => {
      cluster = await RedisCluster.start();
      redis = new Cluster(cluster.nodes, { enableAutoPipelining: true, clusterRetryStrategy: () => 100 });
      await waitFor('ioredis Cluster ready', () => redis.status === 'ready', 10_000);
    }, 90_000);

    afterAll(async () => {
      await redis?.quit().catch(() => undefined);
      await cluster?.stop();
    });

    it('every write is acknowledged by its master’s replica; 2 replicas per master cannot be had', async () => {
      const store = new RedisIdempotencyStore(
        { redis },
        {
          keyPrefix: `replica-wait-cluster-${process.pid}`,
          waitForReplicas: { replicas: 1, timeoutMs: 1500 },
        },
      );
      const idempotency = new Idempotency({ store });
      const results = await Promise.all(
        Array.from({ length: 30 }, (_, i) => idempotency.run({ scope: 's', key: `k-${i}` }, () => i)),
      );
      for (const r of results)
        expect(r).toMatchObject({ outcome: 'ACQUIRED', status: 'completed', recorded: true });
      const strict = new RedisIdempotencyStore(
        { redis },
        {
          keyPrefix: `replica-wait-cluster-${process.pid}`,
          waitForReplicas: { replicas: 2, timeoutMs: 200 },
        },
      );
      await expect(
        strict.claim({ scope: 's', key: 'strict' }, { leaseMs: 1000, retentionMs: 1000 }),
      ).rejects.toMatchObject({
        code: 'REPLICATION_TIMEOUT',
        acknowledgedReplicas: 1,
      });
    });

    it('claimMany while one master’s replica acknowledges nothing: rejects with REPLICATION_TIMEOUT and gives back every claim it wrote, the failed keys’ own too (they were left IN_PROGRESS: CONFLICT until their lease lapsed)', async () => {
      const keyPrefix = `replica-wait-cluster-many-${process.pid}`;
      const unacknowledged = new RedisIdempotencyStore(
        { redis },
        { keyPrefix, waitForReplicas: { replicas: 1, timeoutMs: 300 } },
      );
      const store = new RedisIdempotencyStore(
        { redis },
        { keyPrefix, waitForReplicas: { replicas: 1, timeoutMs: 5000 }, commandTimeoutMs: 10_000 },
      );
      const master = redis.nodes('master')[0]!;
      const replicaPort = Number(/slave0:ip=[^,]+,port=(\d+)/.exec(await master.info('replication'))?.[1]);
      expect(cluster.ports).toContain(replicaPort);
      const options = { leaseMs: 60_000, retentionMs: 60_000, maxAttempts: 2 };
      const masterKey = `${master.options.host}:${master.options.port}`;
      for (const reserve of [false, true]) {
        const ids = Array.from({ length: 30 }, (_, i) => ({ scope: 's', key: `${reserve}-${i}` }));
        // Some keys live on the master whose replica is frozen (about a third), the others elsewhere.
        const slots = await Promise.all(
          ids.map(async (id) => Number(await master.cluster('KEYSLOT', store.recordKey(id)))),
        );
        const onFrozen = slots.filter((slot) => redis.slots[slot]?.[0] === masterKey).length;
        expect(onFrozen).toBeGreaterThan(0);
        expect(onFrozen).toBeLessThan(ids.length);
        cluster.freeze(replicaPort);
        let error: unknown;
        try {
          error = await unacknowledged
            .claimMany(ids.map((id) => ({ id, options: { ...options, reserve } })))
            .catch((e: unknown) => e);
        } finally {
          cluster.resume(replicaPort);
        }
        expect(error).toMatchObject({ code: 'REPLICATION_TIMEOUT', acknowledgedReplicas: 0 });
        // The redelivered batch claims every key at once, none with an attempt spent.
        const again = await store.claimMany(ids.map((id) => ({ id, options })));
        expect(again.map((r) => [r.outcome, r.attempt])).toEqual(ids.map(() => ['ACQUIRED', 1]));
      }
    });

    it('claimMany whose start of one key Redis applied but whose reply was lost: rejects with STORE_UNAVAILABLE naming no written claim and gives back that key’s counted claim too (it was left IN_PROGRESS with its attempt counted: CONFLICT, then ACQUIRED_STALE as attempt 2 although no handler ran)', async () => {
      // A client of its own without auto-pipelining, whose script commands are called as they are defined.
      const own = new Cluster(cluster.nodes, { clusterRetryStrategy: () => 100 });
      await waitFor('ioredis Cluster ready', () => own.status === 'ready', 10_000);
      const store = new RedisIdempotencyStore(
        { redis: own },
        {
          keyPrefix: `replica-wait-cluster-start-${process.pid}`,
          waitForReplicas: { replicas: 1, timeoutMs: 1500 },
        },
      );
      const ids = Array.from({ length: 6 }, (_, i) => ({ scope: 's', key: `k-${i}` }));
      const lost = store.recordKey(ids[0]!);
      // The store counts each reservation with the start script, a command it defined on the client
      // (scripts.ts, defineScripts): the start of one key is applied, then its reply lost.
      const client = own as unknown as Record<string, (key: string, ...args: unknown[]) => Promise<unknown>>;
      const command = Object.keys(client).find((name) => /^idem_start_[0-9a-f]{8}$/.test(name))!;
      const start = client[command]!;
      let dropped = 0;
      client[command] = async (key, ...args) => {
        const reply = await start.call(own, key, ...args);
        if (key !== lost) return reply;
        dropped++;
        throw new Error('Connection is closed.');
      };
      const options = { leaseMs: 60_000, retentionMs: 60_000, maxAttempts: 2 };
      let error: unknown;
      try {
        error = await store.claimMany(ids.map((id) => ({ id, options }))).catch((e: unknown) => e);
      } finally {
        client[command] = start;
      }
      try {
        expect(dropped).toBe(1);
        expect(error).toBeInstanceOf(StoreUnavailableError);
        expect((error as StoreUnavailableError).writtenClaim).toBeUndefined();
        expect(await store.get(ids[0]!)).toMatchObject({ state: 'RELEASED', attempt: 0 });
        // The redelivered batch claims every key at once, none with an attempt spent.
        const again = await store.claimMany(ids.map((id) => ({ id, options })));
        expect(again.map((r) => [r.outcome, r.attempt])).toEqual(ids.map(() => ['ACQUIRED', 1]));
      } finally {
        await own.quit().catch(() => undefined);
      }
    });
  },
);
