import { within } from '../../src/kit/within';

describe('within', () => {
  it("resolves with the work's value when it settles first", async () => {
    await expect(within(Promise.resolve(7), 10_000)).resolves.toBe(7);
  });

  it("rejects with the work's error when it rejects first", async () => {
    const error = new Error('refused');
    await expect(within(Promise.reject(error), 10_000)).rejects.toBe(error);
  });

  it("resolves 'timeout' when the work never settles, and handles its later rejection", async () => {
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown) => unhandled.push(reason);
    process.on('unhandledRejection', onUnhandled);
    try {
      let fail = (_: Error) => {};
      const late = new Promise<number>((_, reject) => (fail = reject));
      await expect(within(late, 5)).resolves.toBe('timeout');
      fail(new Error('late'));
      await new Promise((resolve) => setImmediate(resolve));
      expect(unhandled).toEqual([]);
    } finally {
      process.off('unhandledRejection', onUnhandled);
    }
  });
});
