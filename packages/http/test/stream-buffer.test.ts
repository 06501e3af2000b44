import { Readable } from 'node:stream';
import { type BufferedStream, bufferStream } from '../src/stream-buffer';
import { failingStream } from './failing-stream';

/** Resolves once `stream` has closed (unlike `events.once`, an `error` before it does not reject). */
const closed = (stream: Readable) =>
  stream.closed ? Promise.resolve() : new Promise<void>((resolve) => stream.once('close', () => resolve()));

/** Reads `stream` to its end or its error: the bytes it gave and the error, if any. */
async function drain(stream: Readable): Promise<{ bytes: number; error?: unknown }> {
  let bytes = 0;
  try {
    for await (const chunk of stream) bytes += (chunk as Buffer).length;
    return { bytes };
  } catch (error) {
    return { bytes, error };
  }
}

/**
 * A source that gives five chunks of 1 KiB, then waits: `exhausted` resolves when it is asked for more (the
 * test then fails or destroys it).
 */
function fiveChunksThenWait(): { source: Readable; exhausted: Promise<void> } {
  let chunks = 0;
  let askedForMore!: () => void;
  const exhausted = new Promise<void>((resolve) => {
    askedForMore = resolve;
  });
  const source = new Readable({
    read() {
      if (chunks === 5) return askedForMore();
      chunks += 1;
      this.push(Buffer.alloc(1024, 'x'));
    },
  });
  return { source, exhausted };
}

function pastTheCap(buffered: BufferedStream): Extract<BufferedStream, { complete: false }> {
  if (buffered.complete) throw new Error('expected a stream past the cap');
  return buffered;
}

describe('bufferStream past the cap', () => {
  it('a source that fails before whole() is kept, not emitted unhandled (which ends the process): whole() gives the part read, then the error', async () => {
    const error = new Error('failed right after the cap');
    const source = failingStream(error);
    const buffered = pastTheCap(await bufferStream(source, 4096));
    // A paused stream still reads ahead to its high-water mark: it fails before anyone takes it over.
    await closed(source);
    expect(buffered.failure()).toEqual({ error });
    expect(await drain(buffered.whole())).toEqual({ bytes: 5 * 1024, error });
  });

  it('a source that fails after whole(): the returned stream fails with its error, and failure() reports it', async () => {
    const error = new Error('failed while streaming');
    const { source, exhausted } = fiveChunksThenWait();
    const buffered = pastTheCap(await bufferStream(source, 4096));
    expect(buffered.failure()).toBeUndefined();
    const drained = drain(buffered.whole());
    await exhausted;
    source.destroy(error);
    expect(await drained).toEqual({ bytes: 5 * 1024, error });
    expect(buffered.failure()).toEqual({ error });
  });

  it('the returned stream closing (a client that went away) destroys the source', async () => {
    const source = new Readable({ read() {} });
    for (let i = 0; i < 5; i++) source.push(Buffer.alloc(1024, 'x'));
    const buffered = pastTheCap(await bufferStream(source, 4096));
    const out = buffered.whole();
    const sourceClosed = closed(source);
    out.destroy();
    await sourceClosed;
    expect(source.destroyed).toBe(true);
    expect(buffered.failure()).toBeUndefined();
  });
});

describe('bufferStream, a source destroyed without an error (was waited for forever)', () => {
  it('before the cap: rejects with a premature close', async () => {
    await expect(bufferStream(failingStream(undefined, 2), 4096)).rejects.toMatchObject({
      code: 'ERR_STREAM_PREMATURE_CLOSE',
    });
  });

  it('already closed when it is given: rejects with a premature close', async () => {
    const source = new Readable({ read() {} });
    source.destroy();
    // Its close event, not only `closed` (set a tick before the event).
    await new Promise((resolve) => source.once('close', resolve));
    await expect(bufferStream(source, 4096)).rejects.toMatchObject({ code: 'ERR_STREAM_PREMATURE_CLOSE' });
  });

  it('past the cap, before whole(): failure() reports it and whole() gives the part read, then fails', async () => {
    const source = failingStream(undefined);
    const buffered = pastTheCap(await bufferStream(source, 4096));
    await closed(source);
    expect(buffered.failure()).toEqual({
      error: expect.objectContaining({ code: 'ERR_STREAM_PREMATURE_CLOSE' }),
    });
    const drained = await drain(buffered.whole());
    expect(drained.bytes).toBe(5 * 1024);
    expect(drained.error).toMatchObject({ code: 'ERR_STREAM_PREMATURE_CLOSE' });
  });

  it('past the cap, after whole(): the returned stream fails instead of never ending', async () => {
    const { source, exhausted } = fiveChunksThenWait();
    const buffered = pastTheCap(await bufferStream(source, 4096));
    const drained = drain(buffered.whole());
    await exhausted;
    source.destroy();
    const { bytes, error } = await drained;
    expect(bytes).toBe(5 * 1024);
    expect(error).toMatchObject({ code: 'ERR_STREAM_PREMATURE_CLOSE' });
    expect(buffered.failure()).toEqual({ error });
  });
});

describe('bufferStream, stopped by its signal (a client that went away; was read on forever)', () => {
  it('aborted within the cap, before the end: the source is destroyed and it rejects with a premature close', async () => {
    const { source, exhausted } = fiveChunksThenWait();
    const gone = new AbortController();
    const buffering = bufferStream(source, 64 * 1024, gone.signal);
    await exhausted;
    gone.abort();
    await expect(buffering).rejects.toMatchObject({ code: 'ERR_STREAM_PREMATURE_CLOSE' });
    expect(source.destroyed).toBe(true);
  });

  it('aborted before it is given: the source is destroyed at once, unread', async () => {
    const { source } = fiveChunksThenWait();
    await expect(bufferStream(source, 64 * 1024, AbortSignal.abort())).rejects.toMatchObject({
      code: 'ERR_STREAM_PREMATURE_CLOSE',
    });
    expect(source.destroyed).toBe(true);
  });

  it('aborted after the end: the body read stays whole', async () => {
    const gone = new AbortController();
    const buffered = await bufferStream(Readable.from(['a', 'b']), 4096, gone.signal);
    gone.abort();
    expect(buffered).toEqual({ complete: true, body: Buffer.from('ab') });
  });
});
