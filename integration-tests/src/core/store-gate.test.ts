import { performance } from 'node:perf_hooks';
import { Idempotency, RedisIdempotencyStore, StoreUnavailableError } from '@idempotent-consumer/core';
import { StoreGate } from '@idempotent-consumer/core/kit';
import { usePrivateRedis } from '../../support/redis-server';
import { describeWithServices } from '../../support/service';

// The adapters' fail-closed gate (core/kit StoreGate) against a real Redis that goes away: a private
// redis-server this suite kills and restarts, and CLIENT PAUSE for pings that hang.
describeWithServices(['redis'], 'kit StoreGate on a private redis-server', () => {
  const redisHandle = usePrivateRedis();

  const suffix = Math.random().toString(36).slice(2);
  const store = () =>
    new RedisIdempotencyStore(
      { redis: redisHandle.redis },
      { keyPrefix: `gate-${suffix}`, commandTimeoutMs: 300 },
    );
  const backoff = { baseMs: 50, maxMs: 200, jitter: 'none' as const };

  it('closes on the claim that finds Redis down, stays closed while it is, opens once it answers again', async () => {
    const idempotency = new Idempotency({ store: store(), logger: false }, { leaseMs: 5_000 });
    const events: string[] = [];
    let recoveredMs = -1;
    const gate = new StoreGate(
      idempotency.store,
      { storeProbeBackoff: backoff },
      {
        onStoreUnavailable: ({ error }) => events.push(`unavailable ${(error as Error).name}`),
        onStoreRecovered: ({ downMs }) => {
          recoveredMs = downMs;
          events.push('recovered');
        },
        onProbeFailed: () => events.push('probe failed'),
      },
    );
    await redisHandle.server.stop();
    let stoppedAt = 0;
    try {
      const error = await idempotency.run({ scope: 'g', key: 'down' }, () => 'ran').catch((e: unknown) => e);
      expect(error).toBeInstanceOf(StoreUnavailableError);
      expect(gate.closeIfUnavailable(error)).toBe(true);
      expect(gate.closed).toBe(true);
      // Down for longer than the bound: the bounded wait gives up on time.
      await expect(gate.waitUntilOpenWithin(400)).resolves.toBe(false);
      expect(gate.closed).toBe(true);
      expect(events).toContain('probe failed');
    } finally {
      stoppedAt = performance.now();
      await redisHandle.server.restart();
    }
    await expect(gate.waitUntilOpen()).resolves.toBe(true);
    expect(gate.closed).toBe(false);
    expect(events[0]).toBe('unavailable StoreUnavailableError');
    expect(events.at(-1)).toBe('recovered');
    expect(events.filter((e) => e === 'recovered')).toHaveLength(1);
    expect(recoveredMs).toBeGreaterThan(0);
    expect(performance.now() - stoppedAt).toBeLessThan(20_000);
    await expect(idempotency.run({ scope: 'g', key: 'up-again' }, () => 1)).resolves.toMatchObject({
      outcome: 'ACQUIRED',
      status: 'completed',
    });
    gate.dispose();
  });

  it('waitUntilOpenWithin counts each ping’s own time: pings hanging in CLIENT PAUSE do not stretch it', async () => {
    const gate = new StoreGate(store(), { storeProbeBackoff: { baseMs: 1, maxMs: 1, jitter: 'none' } });
    await redisHandle.admin.client('PAUSE', 3_000, 'ALL');
    gate.close(new StoreUnavailableError('paused'));
    const started = performance.now();
    await expect(gate.waitUntilOpenWithin(500)).resolves.toBe(false);
    const waited = performance.now() - started;
    expect(waited).toBeGreaterThanOrEqual(490);
    expect(waited).toBeLessThan(2_500); // well below the pause: the bound does not wait for a ping to end
    // The pause ends (or its commands time out and the probe retries): the gate opens by itself.
    await expect(gate.waitUntilOpen()).resolves.toBe(true);
    gate.dispose();
  });
});
