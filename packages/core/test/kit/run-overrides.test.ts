import { Idempotency, InvalidOptionError, MemoryIdempotencyStore } from '../../src';
import { checkRunOverrides, pickRunOverrides, type RunOverrides } from '../../src/kit/run-overrides';

describe('kit: RunOverrides', () => {
  it('checkRunOverrides accepts what the runner accepts and returns its argument', () => {
    const options = { leaseMs: 1, maxAttempts: 3, conflictWaitMs: 0, handlerTimeoutMs: 0, queue: 'q' };
    expect(checkRunOverrides(options)).toBe(options);
    expect(checkRunOverrides({})).toEqual({});
  });

  it.each<[RunOverrides, RegExp]>([
    [{ leaseMs: 0 }, /^leaseMs must be an integer >= 1, got 0$/],
    [
      { leaseMs: 2 ** 52 + 1 },
      /^leaseMs must be at most 2\^52 \(4503599627370496\) ms, got 4503599627370497$/,
    ],
    [{ maxAttempts: 1.5 }, /^maxAttempts must be an integer >= 1/],
    [{ conflictWaitMs: -1 }, /^conflictWaitMs must be an integer >= 0/],
    [{ handlerTimeoutMs: Number.NaN }, /^handlerTimeoutMs must be an integer >= 0/],
  ])(
    'checkRunOverrides(%p) throws InvalidOptionError, as the runner does on a call',
    async (overrides, message) => {
      expect(() => checkRunOverrides(overrides)).toThrow(InvalidOptionError);
      expect(() => checkRunOverrides(overrides)).toThrow(message);
      const idempotency = new Idempotency({ store: new MemoryIdempotencyStore(), logger: false });
      await expect(idempotency.run({ scope: 's', key: 'k' }, () => 1, overrides)).rejects.toThrow(message);
    },
  );

  it('pickRunOverrides keeps the four fields that are set and nothing else', () => {
    const adapterOptions = { queue: 'orders', leaseMs: 5000, maxAttempts: undefined, handlerTimeoutMs: 0 };
    expect(pickRunOverrides(adapterOptions)).toEqual({ leaseMs: 5000, handlerTimeoutMs: 0 });
    expect(Object.keys(pickRunOverrides({}))).toEqual([]);
  });
});
