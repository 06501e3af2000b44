import { PassThrough, type Readable } from 'node:stream';

/** A stream read to its end within the cap, or the part read before it passed the cap. */
export type BufferedStream =
  | { readonly complete: true; readonly body: Buffer }
  | {
      readonly complete: false;
      /** Bytes read so far (more than the cap). */
      readonly bytes: number;
      /** Everything the stream gives: the part already read, then the rest. */
      readonly whole: () => Readable;
      /** Stops reading the rest and destroys the source. */
      readonly discard: () => void;
    };

/**
 * Reads a response stream into memory up to `maxBytes`. A longer stream stops being read at the first
 * chunk past the cap; `whole()` then streams the buffered part followed by the rest, unchanged.
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
      resolve({
        complete: false,
        bytes,
        whole: () => {
          const out = new PassThrough();
          out.write(Buffer.concat(chunks));
          stream.on('error', (error) => out.destroy(error));
          stream.pipe(out);
          return out;
        },
        discard: () => stream.destroy(),
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
