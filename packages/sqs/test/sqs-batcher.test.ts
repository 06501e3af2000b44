import { SqsBatcher } from '../src/sqs-batcher';

describe('SqsBatcher', () => {
  it('rejects entries SQS lists in Failed even though the request succeeded', async () => {
    const b = new SqsBatcher<{ v: string }>(
      'DeleteMessageBatch',
      async (entries) => ({
        successful: entries.filter((e) => e.v !== 'bad').map((e) => e.Id),
        failed: entries
          .filter((e) => e.v === 'bad')
          .map((e) => ({ Id: e.Id, Code: 'ReceiptHandleIsInvalid', SenderFault: true })),
      }),
      5,
    );
    const [good, bad] = await Promise.allSettled([b.add({ v: 'good' }), b.add({ v: 'bad' })]);
    expect(good.status).toBe('fulfilled');
    expect(bad).toMatchObject({
      status: 'rejected',
      reason: { code: 'SQS_OPERATION_FAILED', sqsCode: 'ReceiptHandleIsInvalid', senderFault: true },
    });
  });

  it('rejects entries SQS reports in neither list, and every entry when the request fails', async () => {
    const silent = new SqsBatcher<{ v: number }>('X', async () => ({ successful: [], failed: [] }), 0);
    await expect(silent.add({ v: 1 })).rejects.toThrow(/neither success nor failure/);
    const down = new SqsBatcher<{ v: number }>(
      'X',
      async () => {
        throw new Error('throttled');
      },
      0,
    );
    await expect(down.add({ v: 1 })).rejects.toMatchObject({
      code: 'SQS_OPERATION_FAILED',
      message: /throttled/,
    });
  });

  it('sends at most 10 entries per request, at once when 10 are waiting', async () => {
    const sizes: number[] = [];
    const b = new SqsBatcher<{ v: number }>(
      'X',
      async (entries) => {
        sizes.push(entries.length);
        return { successful: entries.map((e) => e.Id), failed: [] };
      },
      60_000,
    );
    const all = Array.from({ length: 23 }, (_, v) => b.add({ v }));
    await Promise.resolve();
    expect(sizes).toEqual([10, 10]); // the 3 left wait for the window...
    await b.drain(); // ...or a drain
    await Promise.all(all);
    expect(sizes).toEqual([10, 10, 3]);
  });
});
