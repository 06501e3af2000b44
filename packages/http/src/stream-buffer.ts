import { PassThrough, Readable } from 'node:stream';

/** A stream read to its end within the cap, or the part read before it passed the cap. */
export type BufferedStream =
  | { readonly complete: true; readonly body: Buffer }
  | {
      readonly complete: false;
      /** Bytes read so far (more than the cap). */
      readonly bytes: number;
      /**
       * Everything the stream gives: the part already read, then the rest. A source that failed (before or
       * after this call) fails the returned stream, after the part already read, with its error. The
       * source is destroyed when the returned stream closes (a client that went away stops it).
       */
      readonly whole: () => Readable;
      /** Stops reading the rest and destroys the source. */
      readonly discard: () => void;
      /** The source's error, once it failed after the cap (`undefined` while it has not). */
      readonly failure: () => { readonly error: unknown } | undefined;
    };

/**
 * Reads a response stream into memory up to `maxBytes`. A longer stream stops being read at the first
 * chunk past the cap; `whole()` then streams the buffered part followed by the rest, unchanged. From the cap
 * on the source always has an error listener: a source that fails before `whole()` or `discard()` took it
 * over (a paused stream still reads ahead, to its high-water mark) would otherwise emit an `error` nobody
 * listens to, which ends the process.
 * @throws the stream's error, when it fails before the end or the cap.
 */
export function bufferStream(stream: Readable, maxBytes: number): Promise<BufferedStream> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let bytes = 0;
    const cleanup = () => {
      stream.off('data', onData);
      stream.off('end', onEnd);
      stream.off('error', onError);
    };
    const onData = (chunk: Buffer | string) => {
      const buffer = typeof chunk === 'string' ? Buffer.from(chunk) : chunk;
      chunks.push(buffer);
      bytes += buffer.length;
      if (bytes <= maxBytes) return;
      cleanup();
      stream.pause();
      let failure: { readonly error: unknown } | undefined;
      stream.on('error', (error) => {
        failure ??= { error };
      });
      resolve({
        complete: false,
        bytes,
        whole: () => {
          const read = Buffer.concat(chunks);
          if (failure) return failingAfter(read, failure.error);
          const out = new PassThrough();
          out.write(read);
          stream.on('error', (error) => out.destroy(error as Error));
          out.once('close', () => stream.destroy());
          stream.pipe(out);
          return out;
        },
        discard: () => stream.destroy(),
        failure: () => failure,
      });
    };
    const onEnd = () => {
      cleanup();
      resolve({ complete: true, body: Buffer.concat(chunks) });
    };
    const onError = (error: unknown) => {
      cleanup();
      reject(error);
    };
    stream.on('data', onData);
    stream.once('end', onEnd);
    stream.once('error', onError);
  });
}

/**
 * A stream of `read` that then fails with `error`, on the read after it: only once a consumer reads, so
 * its error listener is there (an `error` emitted before would be unhandled).
 */
function failingAfter(read: Buffer, error: unknown): Readable {
  let sent = false;
  return new Readable({
    read() {
      if (sent) return void this.destroy(error as Error);
      sent = true;
      this.push(read);
    },
  });
}
