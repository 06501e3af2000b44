import { Idempotency, MemoryIdempotencyStore } from '../src';

describe('onHandlerReturned', () => {
  const runner = (options = {}) =>
    new Idempotency({ store: new MemoryIdempotencyStore(), logger: false }, { leaseMs: 10_000, ...options });

  it('is called once the handler returned, before the completion is written', async () => {
    const idempotency = runner();
    const seen: string[] = [];
    const result = await idempotency.run(
      { scope: 's', key: 'returned' },
      async () => {
        seen.push('handler');
        return 'ok';
      },
      {
        onHandlerReturned: () => {
          seen.push('returned');
          throw new Error('a caller bug changes nothing');
        },
      },
    );
    expect(seen).toEqual(['handler', 'returned']);
    expect(result).toMatchObject({ outcome: 'ACQUIRED', status: 'completed', result: 'ok', recorded: true });
  });

  it('is not called when the handler throws', async () => {
    const idempotency = runner();
    let calls = 0;
    const result = await idempotency.run(
      { scope: 's', key: 'threw' },
      () => {
        throw new Error('boom');
      },
      { onHandlerReturned: () => calls++ },
    );
    expect(result).toMatchObject({ status: 'released' });
    expect(calls).toBe(0);
  });

  it('is not called when the handler ran past handlerTimeoutMs, even when it returns later', async () => {
    const idempotency = runner({ handlerTimeoutMs: 20 });
    let calls = 0;
    let late!: () => void;
    const returnedLate = new Promise<void>((resolve) => {
      late = resolve;
    });
    const result = await idempotency.run(
      { scope: 's', key: 'timed-out' },
      () =>
        new Promise<string>((resolve) =>
          setTimeout(() => {
            resolve('late');
            late();
          }, 200),
        ),
      { onHandlerReturned: () => calls++ },
    );
    expect(result).toMatchObject({ status: 'released' });
    await returnedLate;
    expect(calls).toBe(0);
  });
});
