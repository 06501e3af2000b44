import { Idempotency, RedisIdempotencyStore } from '@idempotent-consumer/core';
import Redis from 'ioredis';
import { waitFor } from '../../support/net';
import { describeWithPrograms } from '../../support/programs';
import { SentinelGroup } from '../../support/redis-sentinel';

const KEYS = 300;
const WORKERS = 4;

// A primary, a replica and three Sentinels this suite starts on loopback; the runner reaches Redis through
// ioredis' Sentinel support, with waitForReplicas so that an acknowledged write is on the replica. A
// `SENTINEL FAILOVER` mid-run promotes the replica; the consumers keep going by themselves (ioredis asks
// the sentinels for the new primary), every key completes, and no key's handler has two acknowledged runs.
describeWithPrograms(['redis-server', 'redis-sentinel'], 'Redis Sentinel failover mid-run', () => {
  let group: SentinelGroup;
  let redis: Redis;

  beforeAll(async () => {
    group = await SentinelGroup.start();
    redis = new Redis({
      sentinels: group.sentinels,
      name: group.masterName,
      failoverDetector: true, // reconnect on +switch-master instead of waiting for an error
      sentinelRetryStrategy: () => 100,
      retryStrategy: () => 100,
      // The demoted primary answers writes with READONLY until the client reconnects to the new one.
      reconnectOnError: (error) => (/^READONLY/.test(error.message) ? 2 : false),
    });
    redis.on('error', () => {}); // reconnections during the failover are expected
  }, 90_000);

  afterAll(async () => {
    redis?.disconnect();
    await group?.stop();
  });

  it('a failover mid-run: every key completes, no handler is recorded twice, the consumers resume by themselves', async () => {
    const store = new RedisIdempotencyStore(
      { redis },
      {
        keyPrefix: `sentinel-${process.pid}`,
        waitForReplicas: { replicas: 1, timeoutMs: 500 },
        commandTimeoutMs: 3000,
      },
    );
    const idempotency = new Idempotency({ store }, { leaseMs: 2000, retentionMs: 600_000, writeAttempts: 2 });

    // Each key is delivered twice (a duplicate), in shuffled order; a delivery not acked is redelivered.
    // Half of the deliveries arrive only once the replica is promoted, so that the consumers certainly have
    // work after the failover (without it a fast run could finish during the failover).
    const queue: string[] = [];
    for (let i = 0; i < KEYS; i++) queue.push(`order-${i}`, `order-${i}`);
    queue.sort(() => Math.random() - 0.5);
    const afterFailover = queue.splice(KEYS);
    const ledger = new Map<string, number[]>(); // the handler's side effects: fencing token of each run
    const acknowledgedRuns = new Map<string, number>(); // runs whose completion the store acknowledged
    const unrecordedRuns = new Map<string, number>(); // runs whose completion was not confirmed durable
    let acked = 0;
    let ackedAfterFailover = 0;
    let failedOver = false;
    let stopped = false; // set when the test ends, so that no worker outlives it
    const errors = new Map<string, number>();
    const failed = new Map<string, string>(); // keys whose claim answered FAILED, with the record's error
    const pending = new Set<Promise<void>>();
    const requeue = (key: string, afterMs: number) => {
      const p = new Promise<void>((resolve) => setTimeout(resolve, afterMs)).then(() => {
        queue.push(key);
        pending.delete(p);
      });
      pending.add(p);
    };
    const bump = (map: Map<string, number>, key: string) => map.set(key, (map.get(key) ?? 0) + 1);
    const ack = () => {
      acked++;
      if (failedOver) ackedAfterFailover++;
    };

    const worker = async () => {
      while (acked < KEYS * 2 && !stopped) {
        const key = queue.shift();
        if (key === undefined) {
          await new Promise((resolve) => setTimeout(resolve, 10));
          continue;
        }
        let ran = false;
        try {
          const result = await idempotency.run({ scope: 'payments', key }, async ({ fencingToken }) => {
            ran = true;
            ledger.set(key, [...(ledger.get(key) ?? []), fencingToken]);
            await new Promise((resolve) => setImmediate(resolve));
            return { charged: key };
          });
          if (result.outcome === 'DUPLICATE') ack();
          else if (result.outcome === 'FAILED') {
            // Never expected (the handler does not throw): a FAILED key would be redelivered for ever, so
            // it is acked and reported below. Before claims under waitForReplicas were counted only once
            // replicated, every claim that timed out on its WAIT after the failover spent an attempt
            // without its handler running, and a few keys ended ATTEMPTS_EXHAUSTED.
            failed.set(key, result.error);
            ack();
          } else if (result.outcome === 'CONFLICT') requeue(key, Math.min(result.retryAfterMs, 200));
          else if ('status' in result && result.status === 'completed' && result.outcome !== 'UNPROTECTED') {
            if (result.recorded) {
              bump(acknowledgedRuns, key);
              ack();
            } else {
              bump(unrecordedRuns, key); // completion not confirmed: redeliver rather than ack
              requeue(key, 50);
            }
          } else {
            if (ran) bump(unrecordedRuns, key); // the lease was lost while it ran: not acked
            requeue(key, 50);
          }
        } catch (error) {
          // StoreUnavailableError / ReplicationTimeoutError during the failover: not acked, redelivered.
          const code = (error as { code?: string }).code ?? String(error);
          errors.set(code, (errors.get(code) ?? 0) + 1);
          requeue(key, 50);
          if (ran) bump(unrecordedRuns, key); // the handler ran, its completion was not confirmed
        }
      }
    };

    const originalPrimary = await group.primaryPort();
    expect(originalPrimary).toBe(group.primary.port);
    const workers = Array.from({ length: WORKERS }, worker);

    let ackedAtFailover = 0;
    try {
      await waitFor('a third of the deliveries acked', () => acked >= (KEYS * 2) / 3, 60_000, 5);
      expect(await group.sentinel('failover', group.masterName)).toBe('OK');
      await waitFor(
        'the sentinels to promote the replica',
        async () => (await group.primaryPort()) === group.replica.port,
        30_000,
        50,
      );
      failedOver = true;
      ackedAtFailover = acked;
      queue.push(...afterFailover);
      await waitFor('every delivery acked', () => acked === KEYS * 2, 90_000, 20);
    } finally {
      stopped = true;
      await Promise.all(workers);
      await Promise.all(pending);
    }

    // The run crossed the failover: deliveries were acked before it and after it, without any restart.
    expect(ackedAtFailover).toBeLessThanOrEqual(KEYS);
    expect(ackedAfterFailover).toBeGreaterThanOrEqual(afterFailover.length);
    expect(acked).toBe(KEYS * 2);
    expect(Object.fromEntries(failed)).toEqual({});
    // No key has two runs whose completion the store acknowledged: no handler recorded twice. Every run is
    // accounted for: acknowledged, or reported not confirmed (REPLICATION_TIMEOUT, lease lost) and so not
    // acked, which is the only way a key's handler runs again; each run has a higher fencing token than
    // the one before; every key ends COMPLETED.
    const violations: string[] = [];
    for (let i = 0; i < KEYS; i++) {
      const key = `order-${i}`;
      const tokens = ledger.get(key) ?? [];
      const acknowledged = acknowledgedRuns.get(key) ?? 0;
      const unconfirmed = unrecordedRuns.get(key) ?? 0;
      if (acknowledged > 1) violations.push(`${key}: ${acknowledged} acknowledged runs`);
      if (tokens.length === 0) violations.push(`${key}: the handler never ran`);
      if (tokens.length !== acknowledged + unconfirmed) {
        violations.push(
          `${key}: ${tokens.length} runs, ${acknowledged} acknowledged + ${unconfirmed} unconfirmed`,
        );
      }
      if (tokens.some((t, j) => j > 0 && t <= tokens[j - 1]!)) violations.push(`${key}: tokens ${tokens}`);
      const record = await store.get({ scope: 'payments', key });
      if (record?.state !== 'COMPLETED') violations.push(`${key}: ${record?.state ?? 'no record'}`);
    }
    expect(violations).toEqual([]);
    // The records live on the promoted replica.
    const promoted = new Redis(group.replica.url);
    try {
      expect(await promoted.call('ROLE').then((r) => (r as unknown[])[0])).toBe('master');
    } finally {
      promoted.disconnect();
    }
    process.stderr.write(
      `[sentinel] acked ${ackedAtFailover} before the failover, ${ackedAfterFailover} after; errors ${JSON.stringify(Object.fromEntries(errors))}; keys run more than once: ${[...ledger.values()].filter((t) => t.length > 1).length}\n`,
    );
  });
});
