import { unlessAborted } from '../../src/kit/unless-aborted';

describe('unlessAborted', () => {
  it("resolves with the promise's value when it settles first", async () => {
    await expect(unlessAborted(Promise.resolve(7), new AbortController().signal)).resolves.toEqual({
      aborted: false,
      value: 7,
    });
  });

  it("rejects with the promise's error when it rejects first", async () => {
    const error = new Error('refused');
    await expect(unlessAborted(Promise.reject(error), new AbortController().signal)).rejects.toBe(error);
  });

  it('ends at the abort, or at once when the signal aborted already, without waiting for a call that never answers', async () => {
    const never = new Promise<number>(() => {});
    const controller = new AbortController();
    const waiting = unlessAborted(never, controller.signal);
    controller.abort();
    await expect(waiting).resolves.toEqual({ aborted: true });
    await expect(unlessAborted(never, controller.signal)).resolves.toEqual({ aborted: true });
  });

  it("handles the call's later rejection (no unhandled rejection) and removes its abort listener when the call settles", async () => {
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown) => unhandled.push(reason);
    process.on('unhandledRejection', onUnhandled);
    try {
      let fail = (_: Error) => {};
      const late = new Promise<number>((_, reject) => {
        fail = reject;
      });
      const controller = new AbortController();
      const waiting = unlessAborted(late, controller.signal);
      controller.abort();
      await expect(waiting).resolves.toEqual({ aborted: true });
      fail(new Error('late'));
      await new Promise((r) => setImmediate(r));
      expect(unhandled).toEqual([]);

      const settles = new AbortController();
      const removed = jest.spyOn(settles.signal, 'removeEventListener');
      await unlessAborted(Promise.resolve(1), settles.signal);
      await new Promise((r) => setImmediate(r));
      expect(removed).toHaveBeenCalledWith('abort', expect.any(Function));
    } finally {
      process.off('unhandledRejection', onUnhandled);
    }
  });
});
