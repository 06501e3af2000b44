import type { ServerResponse } from 'node:http';

/** The reason of every client-gone abort: one object, since `abort()` without one builds a DOMException. */
const CLIENT_GONE = Object.freeze(new Error('The client went away before the response was sent'));

/**
 * A signal that aborts when `res` closes before its response was sent whole: the client went away. A
 * close after the response ended does not abort it (nothing waits on it then; an abort there cost about
 * 13 µs of CPU per request, most of it the DOMException an `abort()` without a reason builds).
 */
export function clientGoneSignal(res: ServerResponse): AbortSignal {
  const gone = new AbortController();
  res.once('close', () => {
    if (!res.writableFinished) gone.abort(CLIENT_GONE);
  });
  return gone.signal;
}
