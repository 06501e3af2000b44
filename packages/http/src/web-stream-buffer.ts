/** A web body stream read to its end within the cap, or the part read before it passed the cap. */
export type BufferedWebStream =
  | { readonly complete: true; readonly body: Buffer }
  | {
      readonly complete: false;
      /** Bytes read so far (more than the cap). */
      readonly bytes: number;
      /**
       * Everything the stream gives: the part already read, then the rest, unchanged. `done` is called
       * once: with nothing when the source ended or the consumer cancelled (the client went away), with
       * the source's error when it failed (the returned stream fails with it too).
       */
      readonly whole: (done?: (failure?: { readonly error: unknown }) => void) => ReadableStream<Uint8Array>;
      /** Stops reading the rest and cancels the source. */
      readonly discard: () => void;
    };

/**
 * Reads a web `ReadableStream` (a fetch `Response` body) into memory up to `maxBytes`. A longer stream
 * stops being read at the first chunk past the cap. `signal` (the client went away) cancels the source
 * and rejects: a body stream that never ends would otherwise be read, and its producer run, for as long
 * as the process lives.
 * @throws the stream's error when it fails before the end or the cap; an `ERR_STREAM_PREMATURE_CLOSE`
 *   error when `signal` aborts (or has aborted) before then.
 */
export async function bufferWebStream(
  stream: ReadableStream<Uint8Array>,
  maxBytes: number,
  signal?: AbortSignal,
): Promise<BufferedWebStream> {
  const reader = stream.getReader();
  const onAbort = () => void reader.cancel().catch(() => undefined);
  signal?.addEventListener('abort', onAbort, { once: true });
  const chunks: Uint8Array[] = [];
  let bytes = 0;
  try {
    for (;;) {
      if (signal?.aborted) throw clientGone();
      const { done, value } = await reader.read();
      if (signal?.aborted) throw clientGone();
      if (done) return { complete: true, body: concat(chunks, bytes) };
      chunks.push(value);
      bytes += value.byteLength;
      if (bytes > maxBytes) break;
    }
  } catch (error) {
    onAbort();
    throw error;
  } finally {
    signal?.removeEventListener('abort', onAbort);
  }
  return {
    complete: false,
    bytes,
    whole: (done) => rest(reader, chunks, done),
    discard: onAbort,
  };
}

/** The part read, then what `reader` still gives; `done` reports how it ended. */
function rest(
  reader: ReadableStreamDefaultReader<Uint8Array>,
  read: Uint8Array[],
  done: ((failure?: { readonly error: unknown }) => void) | undefined,
): ReadableStream<Uint8Array> {
  let ended = false;
  const end = (failure?: { readonly error: unknown }) => {
    if (ended) return;
    ended = true;
    done?.(failure);
  };
  return new ReadableStream<Uint8Array>({
    start(controller) {
      for (const chunk of read) controller.enqueue(chunk);
    },
    async pull(controller) {
      try {
        const next = await reader.read();
        if (next.done) {
          controller.close();
          end();
        } else controller.enqueue(next.value);
      } catch (error) {
        controller.error(error);
        end({ error });
      }
    },
    async cancel(reason) {
      end();
      await reader.cancel(reason).catch(() => undefined);
    },
  });
}

function concat(chunks: Uint8Array[], bytes: number): Buffer {
  if (chunks.length === 1) {
    const only = chunks[0]!;
    return Buffer.from(only.buffer, only.byteOffset, only.byteLength);
  }
  return Buffer.concat(chunks, bytes);
}

/** The error of a body stream given up on because the client went away. */
function clientGone(): Error {
  return Object.assign(new Error('The client went away before the response body stream ended'), {
    code: 'ERR_STREAM_PREMATURE_CLOSE',
  });
}
