import { PassThrough } from 'node:stream';
import { WriteCoalescer } from '../src/store/write-coalescer';

/**
 * A real Node stream (Writable's own cork/uncork) whose `writev`/`write` calls are counted: what reaches
 * the socket as one write each.
 */
function countingStream() {
  const stream = new PassThrough();
  const writes: string[][] = [];
  stream._writev = (chunks, callback) => {
    writes.push(chunks.map((c) => String(c.chunk)));
    callback();
  };
  stream._write = (chunk, _encoding, callback) => {
    writes.push([String(chunk)]);
    callback();
  };
  return { stream, writes };
}

/** Resolves after the callbacks `process.nextTick` holds now (the coalescer's end-of-tick flush). */
const afterTick = () => new Promise<void>((resolve) => process.nextTick(resolve));

describe('WriteCoalescer (several commands per socket write)', () => {
  it('takes an integer maxCommandsPerWrite >= 1, else InvalidOptionError', () => {
    for (const bad of [0, -1, 1.5, Number.NaN, Number.POSITIVE_INFINITY]) {
      expect(() => new WriteCoalescer(bad)).toThrow(expect.objectContaining({ code: 'INVALID_OPTION' }));
    }
    expect(() => new WriteCoalescer(1)).not.toThrow();
  });

  it('writes at most maxCommandsPerWrite commands per write, the rest when the tick ends, in order', async () => {
    const { stream, writes } = countingStream();
    const coalescer = new WriteCoalescer(8);
    for (let i = 0; i < 20; i++) coalescer.send(stream, () => stream.write(`c${i}`));
    expect(writes.map((w) => w.length)).toEqual([8, 8]);
    expect(stream.writableCorked).toBe(1);
    await afterTick();
    expect(writes.map((w) => w.length)).toEqual([8, 8, 4]);
    expect(writes.flat()).toEqual(Array.from({ length: 20 }, (_, i) => `c${i}`));
    expect(stream.writableCorked).toBe(0);
    expect(coalescer.buffered).toBe(0);
  });

  it('holds a single command only until the end of the tick, never for a timer', async () => {
    const { stream, writes } = countingStream();
    const coalescer = new WriteCoalescer(8);
    expect(coalescer.send(stream, () => stream.write('only'))).toBe(true);
    expect(writes).toEqual([]);
    await afterTick();
    expect(writes).toEqual([['only']]);
    expect(stream.writableCorked).toBe(0);
  });

  it('commands sent from promise reactions in one tick share writes', async () => {
    const { stream, writes } = countingStream();
    const coalescer = new WriteCoalescer(4);
    // Like replies arriving together: each reaction sends the next command.
    await Promise.all(
      Array.from({ length: 6 }, (_, i) =>
        Promise.resolve().then(() => coalescer.send(stream, () => stream.write(`r${i}`))),
      ),
    );
    await afterTick();
    expect(writes.map((w) => w.length)).toEqual([4, 2]);
  });

  it('a send that throws still leaves the socket uncorked by the end of the tick', async () => {
    const { stream, writes } = countingStream();
    const coalescer = new WriteCoalescer(8);
    coalescer.send(stream, () => stream.write('before'));
    expect(() =>
      coalescer.send(stream, () => {
        throw new TypeError('bad argument');
      }),
    ).toThrow('bad argument');
    await afterTick();
    expect(writes.flat()).toEqual(['before']);
    expect(stream.writableCorked).toBe(0);
  });

  it('a new socket (a reconnect) first writes what the old one buffered; no socket sends as is', async () => {
    const old = countingStream();
    const next = countingStream();
    const coalescer = new WriteCoalescer(8);
    coalescer.send(old.stream, () => old.stream.write('a'));
    coalescer.send(next.stream, () => next.stream.write('b'));
    expect(old.writes).toEqual([['a']]);
    expect(old.stream.writableCorked).toBe(0);
    expect(coalescer.send(undefined, () => 'offline')).toBe('offline');
    await afterTick();
    expect(next.writes).toEqual([['b']]);
    expect(next.stream.writableCorked).toBe(0);
  });

  it('nests with another cork on the same socket: both flush by the end of the tick', async () => {
    const { stream, writes } = countingStream();
    const a = new WriteCoalescer(2);
    const b = new WriteCoalescer(2);
    a.send(stream, () => stream.write('a1'));
    b.send(stream, () => stream.write('b1'));
    a.send(stream, () => stream.write('a2')); // a is done with its cork; b still holds one
    expect(writes).toEqual([]);
    await afterTick();
    expect(writes).toEqual([['a1', 'b1', 'a2']]);
    expect(stream.writableCorked).toBe(0);
  });
});
