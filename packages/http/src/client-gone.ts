import type { ServerResponse } from 'node:http';
import type { Socket } from 'node:net';

/** The reason of every client-gone abort: one object, since `abort()` without one builds a DOMException. */
const CLIENT_GONE = Object.freeze(new Error('The client went away before the response was sent'));

/** A signal that never aborts. */
const NEVER = new AbortController().signal;

/** One signal per connection: HTTP/1.1 carries one request at a time, and its client leaves by closing it. */
const bySocket = new WeakMap<Socket, AbortSignal>();

/**
 * A signal that aborts when the client of `res` goes away: its connection closes. One per connection
 * rather than per request: an `AbortController` and its listener cost about 14 µs of CPU per request,
 * one per keep-alive connection next to nothing. A response without a socket gets one that never aborts.
 * On HTTP/2 (Node's compatibility API) it aborts when the session's connection closes, not the stream.
 */
export function clientGoneSignal(res: ServerResponse): AbortSignal {
  const socket = res.socket ?? res.req?.socket;
  if (!socket) return NEVER;
  let signal = bySocket.get(socket);
  if (!signal) {
    const gone = new AbortController();
    signal = gone.signal;
    bySocket.set(socket, signal);
    if (socket.destroyed) gone.abort(CLIENT_GONE);
    else socket.once('close', () => gone.abort(CLIENT_GONE));
  }
  return signal;
}
