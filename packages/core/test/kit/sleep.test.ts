import { performance } from 'node:perf_hooks';
import { sleep } from '../../src/kit/sleep';

describe('kit: sleep', () => {
  it('resolves true after the delay', async () => {
    const started = performance.now();
    await expect(sleep(20)).resolves.toBe(true);
    expect(performance.now() - started).toBeGreaterThanOrEqual(19);
  });

  it('resolves false, without rejecting, when the signal aborts mid-way', async () => {
    const controller = new AbortController();
    const started = performance.now();
    const slept = sleep(60_000, controller.signal);
    controller.abort(new Error('stopping'));
    await expect(slept).resolves.toBe(false);
    expect(performance.now() - started).toBeLessThan(30_000);
  });

  it('resolves false at once for a signal that has aborted already', async () => {
    const controller = new AbortController();
    controller.abort();
    await expect(sleep(60_000, controller.signal)).resolves.toBe(false);
  });

  it('removes its abort listener when the delay passes (no build-up on a long-lived signal)', async () => {
    const controller = new AbortController();
    const added = jest.spyOn(controller.signal, 'addEventListener');
    const removed = jest.spyOn(controller.signal, 'removeEventListener');
    for (let i = 0; i < 5; i++) await sleep(1, controller.signal);
    expect(added).toHaveBeenCalledTimes(5);
    expect(removed).toHaveBeenCalledTimes(5);
  });

  it('treats a negative or NaN delay as 0', async () => {
    await expect(sleep(-5)).resolves.toBe(true);
    await expect(sleep(Number.NaN)).resolves.toBe(true);
  });

  it("does not keep the process alive (the timer is unref'd)", () => {
    const spy = jest.spyOn(global, 'setTimeout');
    void sleep(60_000);
    const timer = spy.mock.results.at(-1)?.value as NodeJS.Timeout;
    spy.mockRestore();
    expect(timer.hasRef()).toBe(false);
    clearTimeout(timer);
  });
});
