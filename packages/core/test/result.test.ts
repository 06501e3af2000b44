import { randomBytes } from 'node:crypto';
import {
  Idempotency,
  type IdempotencyOptions,
  MemoryIdempotencyStore,
  ResultTooLargeError,
  UnexpectedReplyError,
} from '../src';
import { decodeResult, encodeResult } from '../src/tools';
import { recordEvents } from './support/faulty-store';

const request = { scope: 'results', key: 'k' };
const codec = { maxResultBytes: 65_536, onResultTooLarge: 'omit', compressAboveBytes: 1024 } as const;

function setup(options: IdempotencyOptions = {}) {
  const store = new MemoryIdempotencyStore();
  const idempotency = new Idempotency({ store }, { leaseMs: 10_000, ...options });
  return { store, idempotency, events: recordEvents(idempotency) };
}

/**
 * `n` random CJK characters (3 UTF-8 bytes each) from 256 code points: 8 bits each, so deflate
 * plus base64 is longer in characters than the text, and shorter in bytes.
 */
function cjk(n: number): string {
  const bytes = randomBytes(2 * n);
  let text = '';
  for (let i = 0; i < n; i++) text += String.fromCharCode(0x4e00 + (bytes.readUInt16LE(2 * i) % 256));
  return text;
}

describe('compression is chosen by comparing bytes, not UTF-16 lengths', () => {
  it('30,000 CJK characters (90 KB) compress under the 64 KB cap instead of being omitted', () => {
    const value = cjk(30_000);
    const rawBytes = Buffer.byteLength(JSON.stringify(value));
    expect(rawBytes).toBeGreaterThan(65_536);
    const encoded = encodeResult(value, codec);
    expect(encoded).toMatchObject({ kind: 'stored' });
    const stored = (encoded as { value: string }).value;
    expect(stored.startsWith('z')).toBe(true);
    // The compressed form is longer in characters than the raw JSON, and shorter in bytes.
    expect(stored.length).toBeGreaterThan(value.length);
    expect(Buffer.byteLength(stored)).toBeLessThan(rawBytes);
    expect(decodeResult(stored)).toBe(value);
  });

  it('20,000 CJK characters (60 KB) are stored compressed, not raw', () => {
    const value = cjk(20_000);
    const stored = (encodeResult(value, codec) as { value: string }).value;
    expect(stored.startsWith('z')).toBe(true);
    expect(Buffer.byteLength(stored)).toBeLessThan(Buffer.byteLength(JSON.stringify(value)));
  });
});

describe('result size cap and compression', () => {
  it("onResultTooLarge 'omit' (default): completes without a result and emits resultOmitted", async () => {
    const { idempotency, store, events } = setup({ maxResultBytes: 100, compressAboveBytes: Infinity });
    const big = 'x'.repeat(200);
    const result = await idempotency.run(request, () => big);
    expect(result).toMatchObject({ status: 'completed', result: big, recorded: true, resultOmitted: true });
    expect(events.find(([n]) => n === 'resultOmitted')?.[1]).toEqual({
      scope: 'results',
      key: 'k',
      bytes: 203,
      maxResultBytes: 100,
    });
    expect(await store.get(request)).toMatchObject({ state: 'COMPLETED', result: undefined });
    expect(await idempotency.run(request, () => 'again')).toMatchObject({
      outcome: 'DUPLICATE',
      hasResult: false,
      result: undefined,
    });
  });

  it("onResultTooLarge 'fail': the record is FAILED with ResultTooLargeError; duplicates never run", async () => {
    const { idempotency, store } = setup({ maxResultBytes: 100, onResultTooLarge: 'fail' });
    const result = await idempotency.run(request, () => randomBytes(200).toString('hex'));
    expect(result).toMatchObject({ status: 'failed', reason: 'result-too-large', recorded: true });
    const error = (result as { error: unknown }).error;
    expect(error).toBeInstanceOf(ResultTooLargeError);
    expect(error).toMatchObject({ code: 'RESULT_TOO_LARGE', retryable: false });
    expect(await store.get(request)).toMatchObject({
      state: 'FAILED',
      error: expect.stringContaining('RESULT_TOO_LARGE'),
    });
    const handler = jest.fn();
    expect(await idempotency.run(request, handler)).toMatchObject({ outcome: 'FAILED' });
    expect(handler).not.toHaveBeenCalled();
  });

  it('a result that cannot be serialized as JSON fails the record with ResultTooLargeError and a cause', async () => {
    const { idempotency } = setup();
    const result = await idempotency.run(request, () => ({ n: 1n }));
    expect(result).toMatchObject({ status: 'failed', reason: 'result-too-large' });
    expect((result as { error: Error }).error.cause).toBeInstanceOf(TypeError);
  });

  it('compresses a large result (stored as z + base64 deflate) and replays it intact', async () => {
    const { idempotency, store } = setup({ compressAboveBytes: 1024 });
    const value = {
      lines: Array.from({ length: 300 }, (_, i) => ({ sku: `SKU-${i % 7}`, qty: i % 3, ok: true })),
    };
    await idempotency.run(request, () => value);
    const stored = (await store.get(request))?.result ?? '';
    expect(stored.startsWith('z')).toBe(true);
    expect(stored.length).toBeLessThan(JSON.stringify(value).length / 4);
    expect(await idempotency.run(request, () => null)).toMatchObject({ outcome: 'DUPLICATE', result: value });
  });

  it('the cap applies after compression: a result over the cap as JSON but under it deflated is stored', async () => {
    const { idempotency, store, events } = setup({ maxResultBytes: 2_000, compressAboveBytes: 0 });
    const value = 'abc'.repeat(5_000);
    expect(await idempotency.run(request, () => value)).toMatchObject({ resultOmitted: false });
    expect((await store.get(request))?.result?.startsWith('z')).toBe(true);
    expect(events.some(([n]) => n === 'resultOmitted')).toBe(false);
    expect(await idempotency.run(request, () => null)).toMatchObject({ result: value });
  });

  it('encodeResult: small values stay JSON; incompressible data stays JSON; undefined stores nothing', () => {
    expect(encodeResult({ a: 1 }, codec)).toEqual({ kind: 'stored', value: 'j{"a":1}' });
    const noise = randomBytes(3000).toString('base64');
    expect(encodeResult(noise, codec)).toEqual({ kind: 'stored', value: `j${JSON.stringify(noise)}` });
    expect(encodeResult(undefined, codec)).toEqual({ kind: 'none' });
    expect(encodeResult(() => 1, codec)).toEqual({ kind: 'none' });
    expect(encodeResult(null, codec)).toEqual({ kind: 'stored', value: 'jnull' });
  });

  it.each([
    ['j', null, { n: [1, 'two', null] }],
    ['z', 0, { n: 'x'.repeat(5000) }],
  ] as const)('round-trips through encodeResult/decodeResult (%s)', (prefix, compressAboveBytes, value) => {
    const encoded = encodeResult(value, { ...codec, compressAboveBytes: compressAboveBytes ?? Infinity });
    if (encoded.kind !== 'stored') throw new Error('not stored');
    expect(encoded.value[0]).toBe(prefix);
    expect(decodeResult(encoded.value)).toEqual(value);
  });

  it.each([['?{"a":1}'], ['j{not json'], ['z!!!not-deflate'], ['']])(
    'decodeResult rejects a corrupt or unknown stored value %j with UnexpectedReplyError',
    (stored) => {
      expect(() => decodeResult(stored)).toThrow(UnexpectedReplyError);
    },
  );
});
