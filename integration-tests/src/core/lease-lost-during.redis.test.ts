import { buildRecordKey, Idempotency, RedisIdempotencyStore } from '@idempotent-consumer/core';
import { usePrivateRedis } from '../../support/redis-server';
import { describeWithServices } from '../../support/service';

// A private redis-server: the test pauses its writes, which must disturb no other suite.
describeWithServices(['redis'], "core: where a claim was lost ('during') on a real Redis", () => {
  const redisHandle = usePrivateRedis();

  it("a loss the heartbeat saw first, then the completion write unanswered and written late: the late write's lease-lost says 'heartbeat', as the runner's first leaseLost did", async () => {
    const keyPrefix = 'during-late';
    const request = { scope: 'late', key: 'vanishes' };
    const store = new RedisIdempotencyStore(
      { redis: redisHandle.redis },
      { keyPrefix, commandTimeoutMs: 300 },
    );
    const idempotency = new Idempotency(
      { store, logger: false },
      { leaseMs: 1_000, retentionMs: 60_000, writeAttempts: 1 },
    );
    const lost: string[] = [];
    idempotency.on('leaseLost', ({ during }) => lost.push(during));

    const run = await idempotency.run(request, async ({ signal }) => {
      // Redis loses the record while the handler runs: the next extension is refused, the signal aborts.
      await redisHandle.admin.del(buildRecordKey(keyPrefix, request));
      await new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }));
      // Then Redis stops answering writes: the completion write after the handler is not answered.
      await redisHandle.admin.client('PAUSE', 1_500, 'WRITE');
      return 'done';
    });
    expect(run).toMatchObject({ status: 'completed', recorded: false });
    expect(lost).toEqual(['heartbeat']);
    if (run.outcome === 'UNPROTECTED' || !('status' in run) || run.status !== 'completed')
      throw new Error('unreachable');

    await redisHandle.admin.client('UNPAUSE');
    // The adapters write it again (recordCompletionLate, Kafka's writeCompletion): the store refuses it.
    const late = await idempotency.completeClaim(request, run);
    expect(late).toMatchObject({ status: 'lease-lost', handlerCompleted: true, during: 'heartbeat' });
  });
});
