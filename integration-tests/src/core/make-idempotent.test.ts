import {
  Idempotency,
  IdempotencyConflictError,
  makeIdempotent,
  RedisIdempotencyStore,
} from '@idempotent-consumer/core';
import Redis from 'ioredis';
import { describeWithServices } from '../../support/service';

describeWithServices(['redis'], 'makeIdempotent on real Redis', ({ redis: url }) => {
  const clients: Redis[] = [];
  beforeAll(() => {
    for (let i = 0; i < 8; i++) clients.push(new Redis(url));
  });
  afterAll(() => Promise.all(clients.map((c) => c.quit())));

  it('8 clients racing on one key: one runs, the others conflict, then every call replays its result', async () => {
    const keyPrefix = `make-idem-${process.pid}-${Date.now()}`;
    const runs: string[] = [];
    let winnerStarted!: () => void;
    const started = new Promise<void>((resolve) => {
      winnerStarted = resolve;
    });
    let finish!: () => void;
    const finished = new Promise<void>((resolve) => {
      finish = resolve;
    });
    const wrappers = clients.map((redis, i) =>
      makeIdempotent(
        async (orderId: string, amountCents: number) => {
          runs.push(`client-${i}`);
          winnerStarted();
          await finished;
          return { orderId, chargedCents: amountCents, by: i };
        },
        {
          idempotency: new Idempotency({ store: new RedisIdempotencyStore({ redis }, { keyPrefix }) }),
          scope: 'charge',
          key: (orderId) => orderId,
          payload: (orderId, amountCents) => ({ orderId, amountCents }),
        },
      ),
    );
    let settledCount = 0;
    let othersSettled!: () => void;
    const allButOne = new Promise<void>((resolve) => {
      othersSettled = resolve;
    });
    const racing = wrappers.map((charge) =>
      charge('order-7', 4200)
        .then(
          (value) => ({ value }),
          (error: unknown) => ({ error }),
        )
        .finally(() => {
          if (++settledCount === wrappers.length - 1) othersSettled();
        }),
    );
    // Every call but the winner's ends while the winner's function waits; then it may finish. (On a busy
    // machine the others' CONFLICT replies can all arrive before the winner's own claim reply does.)
    await Promise.all([allButOne, started]);
    expect(runs).toHaveLength(1);
    finish();
    const results = await Promise.all(racing);
    const winner = Number(runs[0]!.slice('client-'.length));
    for (const [i, r] of results.entries()) {
      if (i === winner) expect(r).toEqual({ value: { orderId: 'order-7', chargedCents: 4200, by: winner } });
      else expect((r as { error: unknown }).error).toBeInstanceOf(IdempotencyConflictError);
    }
    // After completion every client replays the winner's stored result without running.
    for (const charge of wrappers) {
      await expect(charge('order-7', 4200)).resolves.toEqual({
        orderId: 'order-7',
        chargedCents: 4200,
        by: winner,
      });
    }
    const outcome = await wrappers[0]!.run('order-7', 4200);
    expect(outcome).toMatchObject({ outcome: 'DUPLICATE', attempt: 1, fencingToken: expect.any(Number) });
    await expect(wrappers[1]!('order-7', 1)).rejects.toMatchObject({ code: 'PAYLOAD_MISMATCH' });
    expect(runs).toHaveLength(1);
  });
});
