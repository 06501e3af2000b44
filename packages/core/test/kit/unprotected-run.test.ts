import { HandlerTimeoutError } from '../../src';
import { runUnprotected } from '../../src/kit/unprotected-run';

const context = {
  scope: 's',
  key: undefined,
  fencingToken: 0,
  attempt: 1,
  outcome: 'UNPROTECTED',
} as const;

describe('runUnprotected', () => {
  it('hands the handler its context and returns its value as a completed UNPROTECTED result', async () => {
    const seen: unknown[] = [];
    const result = await runUnprotected(
      (c) => {
        seen.push({ ...c, signal: c.signal.aborted });
        return 'v';
      },
      context,
      undefined,
      { storeError: 'down' },
    );
    expect(seen).toEqual([{ ...context, signal: false }]);
    expect(result).toEqual({ outcome: 'UNPROTECTED', status: 'completed', result: 'v', storeError: 'down' });
  });

  it('returns a throw as a threw result, never rejecting', async () => {
    const boom = new Error('boom');
    const result = await runUnprotected(
      () => {
        throw boom;
      },
      context,
      undefined,
    );
    expect(result).toEqual({ outcome: 'UNPROTECTED', status: 'threw', error: boom, storeError: undefined });
  });

  it("aborts the handler's signal when the consumer stops, with the stop's reason", async () => {
    const stopping = new AbortController();
    const result = runUnprotected(
      ({ signal }) =>
        new Promise((resolve) =>
          signal.addEventListener('abort', () => resolve(signal.reason), { once: true }),
        ),
      context,
      stopping.signal,
    );
    stopping.abort('stopping');
    expect(await result).toMatchObject({ status: 'completed', result: 'stopping' });
  });

  it('a signal already aborted is aborted for the handler too', async () => {
    const stopping = new AbortController();
    stopping.abort('gone');
    const result = await runUnprotected(({ signal }) => signal.aborted, context, stopping.signal);
    expect(result).toMatchObject({ status: 'completed', result: true });
  });

  it('ends as threw with a HandlerTimeoutError past handlerTimeoutMs, the signal aborted with it', async () => {
    let reason: unknown;
    const result = await runUnprotected(
      ({ signal }) =>
        new Promise(() => {
          signal.addEventListener('abort', () => {
            reason = signal.reason;
          });
        }),
      context,
      undefined,
      { handlerTimeoutMs: 10 },
    );
    expect(result).toMatchObject({ status: 'threw', error: expect.any(HandlerTimeoutError) });
    expect(reason).toBe((result as { error: unknown }).error);
  });

  it('a handlerTimeoutMs longer than a Node timer holds (2^31 ms and more) does not abort the handler', async () => {
    const result = await runUnprotected(
      async (c) => {
        await new Promise((r) => setTimeout(r, 30)); // a 1 ms timer created before this one fires first
        return c.signal.aborted;
      },
      context,
      undefined,
      { handlerTimeoutMs: 2 ** 31 },
    );
    expect(result).toEqual({
      outcome: 'UNPROTECTED',
      status: 'completed',
      result: false,
      storeError: undefined,
    });
  });
});
