import { InvalidOptionError } from '@idempotent-consumer/core';
import type { JsMsg } from '@nats-io/jetstream';
import { headers } from '@nats-io/nats-core';
import { defaultIdempotencyKey, resolveNatsOptions } from '../src/options';

const base = { stream: 'PAY', consumer: 'charger', deadLetterSubject: 'dead.pay' };
const message = (id?: string) => {
  const h = headers();
  if (id !== undefined) h.set('Nats-Msg-Id', id);
  return { headers: h, data: new Uint8Array([1]) } as unknown as JsMsg;
};

describe('resolveNatsOptions', () => {
  it('defaults: scope <stream>/<consumer>, Nats-Msg-Id key, data fingerprinted, 16 in flight', () => {
    const resolved = resolveNatsOptions(base);
    expect(resolved).toMatchObject({ scope: 'PAY/charger', missingKey: 'dead-letter', concurrency: 16 });
    expect(resolved.stopTimeoutMs).toBe(30_000);
    expect(resolved.overrides).toEqual({ conflictWaitMs: 5000 });
    expect(resolved.payload(message('k'))).toEqual(new Uint8Array([1]));
    expect(resolveNatsOptions({ ...base, fingerprint: false }).payload(message('k'))).toBeUndefined();
  });

  it('reads the key from Nats-Msg-Id; an empty or absent header is no key', () => {
    expect(defaultIdempotencyKey(message('pay-1'))).toBe('pay-1');
    expect(defaultIdempotencyKey(message(''))).toBeUndefined();
    expect(defaultIdempotencyKey(message())).toBeUndefined();
    expect(defaultIdempotencyKey({ headers: undefined } as JsMsg)).toBeUndefined();
  });

  it.each([
    [{ ...base, stream: '' }, /stream/],
    [{ ...base, deadLetterSubject: undefined as unknown as string }, /deadLetterSubject/],
    [{ ...base, concurrency: 0 }, /concurrency/],
    [{ ...base, leaseMs: -1 }, /leaseMs/],
    [{ ...base, missingKey: 'drop' as 'process' }, /missingKey/],
    [{ ...base, fingerprint: 'yes' as unknown as boolean }, /fingerprint/],
    [{ ...base, idempotencyKey: 'Nats-Msg-Id' as never }, /idempotencyKey/],
  ])('refuses %o', (options, message) => {
    expect(() => resolveNatsOptions(options)).toThrow(InvalidOptionError);
    expect(() => resolveNatsOptions(options)).toThrow(message);
  });
});
