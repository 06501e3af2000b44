import type { Writable } from 'node:stream';

/** How the writes to one of the CLI's output streams ended. */
export type WritesOutcome =
  /** Everything written was handed on, or nothing was written. */
  | { readonly kind: 'written' }
  /** The reader went away before all of it was written, such as a pipe closed early by `| head -1`. */
  | { readonly kind: 'cut' }
  /** A write failed in another way, such as a full disk behind a redirect. */
  | { readonly kind: 'failed'; readonly error: unknown };

/** An output stream whose writes are followed. {@link TrackedStream.settled} tells how they ended. */
export interface TrackedStream {
  /** Writes `text`. After a failed write, nothing more is written. */
  write(text: string): void;
  /** Resolves once every write so far was handed on or failed. Never rejects. */
  settled(): Promise<WritesOutcome>;
}

/** Streams given an `error` listener, once each, since a process's stdout is given to every run. */
const guarded = new WeakSet<Writable>();

/**
 * Follows the writes to `stream`. A failed write is reported to its callback and also emitted as the stream's
 * `error`. Unheard, that error ends the process with a stack trace, as a closed pipe's EPIPE would. So the
 * stream gets a listener that leaves the error to the callbacks and to `settled`.
 */
export function trackWrites(stream: Writable): TrackedStream {
  if (!guarded.has(stream)) {
    guarded.add(stream);
    stream.on('error', () => undefined);
  }
  const pending: Promise<void>[] = [];
  let outcome: WritesOutcome = { kind: 'written' };
  const fail = (error: unknown) => {
    if (outcome.kind === 'written')
      outcome = isReaderGone(error) ? { kind: 'cut' } : { kind: 'failed', error };
  };
  return {
    write(text) {
      if (outcome.kind !== 'written') return;
      pending.push(
        new Promise((resolve) => {
          try {
            stream.write(text, (error) => {
              if (error) fail(error);
              resolve();
            });
          } catch (error) {
            // A synchronous stream, such as a file, throws its write's error.
            fail(error);
            resolve();
          }
        }),
      );
    },
    async settled() {
      await Promise.all(pending);
      return outcome;
    },
  };
}

/**
 * Whether a write failed because nobody reads any more. That is EPIPE, when the reader closed the pipe or
 * socket, or a write to a stream already destroyed by such an error or by its reader.
 */
function isReaderGone(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return code === 'EPIPE' || code === 'ERR_STREAM_DESTROYED';
}
