import { LongTimeout, MAX_TIMER_MS } from '../../src/kit/long-timeout';

describe('kit: LongTimeout', () => {
  afterEach(() => jest.useRealTimers());

  it('fires a delay within a Node timer once, when due', () => {
    jest.useFakeTimers();
    const fired = jest.fn();
    new LongTimeout(fired, 50);
    jest.advanceTimersByTime(49);
    expect(fired).not.toHaveBeenCalled();
    jest.advanceTimersByTime(1);
    expect(fired).toHaveBeenCalledTimes(1);
  });

  it('fires a delay longer than a Node timer holds when due, not after 1 ms', () => {
    jest.useFakeTimers();
    const fired = jest.fn();
    const delayMs = 2 * MAX_TIMER_MS + 10;
    new LongTimeout(fired, delayMs);
    jest.advanceTimersByTime(MAX_TIMER_MS);
    jest.advanceTimersByTime(MAX_TIMER_MS);
    jest.advanceTimersByTime(9);
    expect(fired).not.toHaveBeenCalled();
    jest.advanceTimersByTime(1);
    expect(fired).toHaveBeenCalledTimes(1);
  });

  it('clear() cancels it, also after the first link of the chain', () => {
    jest.useFakeTimers();
    const fired = jest.fn();
    const timeout = new LongTimeout(fired, MAX_TIMER_MS + 10);
    jest.advanceTimersByTime(MAX_TIMER_MS + 1);
    timeout.clear();
    jest.advanceTimersByTime(MAX_TIMER_MS);
    expect(fired).not.toHaveBeenCalled();
  });

  it('a real timer of 2^31 ms is still pending after a 1 ms one fired (Node would fire it after 1 ms)', async () => {
    const fired = jest.fn();
    const timeout = new LongTimeout(fired, 2 ** 31, { unref: true });
    await new Promise((r) => setTimeout(r, 20));
    expect(fired).not.toHaveBeenCalled();
    timeout.clear();
  });
});
