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
       * after this call), or closed before its end, fails the returned stream, after the part already read,
       * with its error (`ERR_STREAM_PREMATURE_CLOSE` for a close). The source is destroyed when the returned
       * stream closes (a client that went away stops it; that is no failure).
       */
      readonly whole: () => Readable;
      /** Stops reading the rest and destroys the source. */
      readonly discard: () => void;
      /**
       * The source's error, once it failed after the cap or closed before its end without one
       * (`ERR_STREAM_PREMATURE_CLOSE`); `undefined` while it has not.
       */
      readonly failure: () => { readonly error: unknown } | undefined;
    };

/**
 * Reads a response stream into memory up to `maxBytes`. A longer stream stops being read at the first
 * chunk past the cap; `whole()` then streams the buffered part followed by the rest, unchanged. From the cap
 * on the source always has an error listener: a source that fails before `whole()` or `discard()` took it
 * over (a paused stream still reads ahead, to its high-water mark) would otherwise emit an `error` nobody
 * listens to, which ends the process. A stream destroyed without an error (no `end`, no `error`, only
 * `close`, also before this call) fails with `ERR_STREAM_PREMATURE_CLOSE`, as Node's `stream.finished`
 * reports it: waiting for its end would hold the response, and the key, forever. `signal` (the client went
 * away) stops the reading before the end or the cap: the stream is destroyed, as Fastify destroys a payload
 * stream whose response closed, since nobody will read the rest (a stream that never ends would otherwise
 * be read, and its producer run, for as long as the process lives).
 * @throws the stream's error, when it fails (or closes) before the end or the cap; an
 *   `ERR_STREAM_PREMATURE_CLOSE` error when `signal` aborts (or has aborted) before then.
 */
export function bufferStream(
  stream: Readable,
  maxBytes: number,
  signal?: AbortSignal,
): Promise<BufferedStream> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let bytes = 0;
    const cleanup = () => {
      stream.off('data', onData);
      stream.off('end', onEnd);
      stream.off('error', onError);
      stream.off('close', onClose);
      signal?.removeEventListener('abort', onAbort);
    };
    const onData = (chunk: Buffer | string) => {
      const buffer = typeof chunk === 'string' ? Buffer.from(chunk) : chunk;
      chunks.push(buffer);
      bytes += buffer.length;
      if (bytes <= maxBytes) return;
      cleanup();
      stream.pause();
      let failure: { readonly error: unknown } | undefined;
      let out: PassThrough | undefined;
      // Set when the source is destroyed here (discarded, or the returned stream closed): its close then
      // is no failure.
      let stopped = false;
      const stop = () => {
        stopped = true;
        stream.destroy();
      };
      const fail = (error: unknown) => {
        failure ??= { error };
        out?.destroy(failure.error as Error);
      };
      stream.on('error', fail);
      stream.once('close', () => {
        // `readableEnded` is `undefined` on a stream of another kind than Node's: its close is taken as an end.
        if (!stopped && stream.readableEnded === false) fail(prematureClose());
      });
      resolve({
        complete: false,
        bytes,
        whole: () => {
          const read = Buffer.concat(chunks);
          if (failure) return failingAfter(read, failure.error);
          out = new PassThrough();
          out.write(read);
          out.once('close', stop);
          stream.pipe(out);
          return out;
        },
        discard: stop,
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
    const onClose = () => onError(prematureClose());
    const onAbort = () => {
      onError(prematureClose('The client went away before the response body stream ended'));
      // An error from its teardown has nobody left to tell; unheard, it would end the process.
      stream.on('error', () => undefined);
      stream.destroy();
    };
    // Destroyed before it was given (its close may have been emitted already): it will never end.
    if (stream.destroyed && stream.readableEnded === false) return reject(stream.errored ?? prematureClose());
    if (signal?.aborted) return onAbort();
    signal?.addEventListener('abort', onAbort, { once: true });
    stream.on('data', onData);
    stream.once('end', onEnd);
    stream.once('error', onError);
    stream.once('close', onClose);
  });
}

/**
 * The error of a stream that closed before its end without one, as Node's `stream.finished` reports it (or
 * that was destroyed here because the client went away, `message` saying so).
 */
function prematureClose(message = 'The response body stream closed before its end'): Error {
  return Object.assign(new Error(message), {
    code: 'ERR_STREAM_PREMATURE_CLOSE',
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
