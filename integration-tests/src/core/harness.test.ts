import { Idempotency, RedisIdempotencyStore } from '@idempotent-consumer/core';
import Redis from 'ioredis';
import { describeWithServices } from '../../support/service';

describeWithServices(['redis'], 'harness: a claim on real Redis', ({ redis: url }) => {
  let redis: Redis;
  beforeAll(() => {
    redis = new Redis(url);
  });
  afterAll(() => redis.quit());

  it('runs a handler once and replays its result', async () => {
    const store = new RedisIdempotencyStore({ redis }, { keyPrefix: `harness-${process.pid}-${Date.now()}` });
    const idempotency = new Idempotency({ store });
    let runs = 0;
    const first = await idempotency.run({ scope: 'harness', key: 'k1' }, () => ++runs);
    const second = await idempotency.run({ scope: 'harness', key: 'k1' }, () => ++runs);
    expect(first).toMatchObject({ outcome: 'ACQUIRED', status: 'completed', result: 1 });
    expect(second).toMatchObject({ outcome: 'DUPLICATE', result: 1 });
    expect(runs).toBe(1);
  });
});
