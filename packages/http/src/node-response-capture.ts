import type { ServerResponse } from 'node:http';
import { headersBefore, replaceHeaders, withHeadersBefore } from './answer';
import type { ClaimedRequest } from './claimed-request';
import type { HttpAnswer } from './problem';
import type { OutgoingHeaders } from './stored-response';

type WriteCallback = (error?: Error | null) => void;
type Chunk = string | Buffer | Uint8Array;

/**
 * Captures what a handler writes to a Node `ServerResponse` (its `writeHead`, `write` and `end`, which
 * Express' `res.send` and `res.json`, Fastify's reply and NestJS on either platform all go through, as do
 * piped streams) so that the record is written before anything is sent: the body is buffered up to
 * `maxResponseBytes`; at `end` the claimed request is finished and then the handler's response (or the
 * replacement answer `finish` gave) is sent.
 *
 * A body that passes `maxResponseBytes`: with `pass-through` the buffered part and the rest are streamed as
 * written and the claimed request finishes (without a stored response) when the handler ends the response; with
 * `fail` the claimed request finishes at once, its 500 answer is sent, and the rest of the handler's writes are
 * dropped. An answer that replaces the handler's (500 `response-too-large`) goes out with the headers
 * `res` had when the capture began (set by middleware before the idempotency middleware: CORS...) and its
 * own, never the handler's.
 *
 * An error handler answering after the handler failed mid-response sees `res.headersSent` false while
 * buffering and answers anew: the handler's part is dropped and the error answer alone is recorded and
 * sent. That is known for sure when the returned `failed` is called (`recordIdempotencyError`), and
 * otherwise guessed from the end: another status than the buffered chunks were written under, or a
 * `Content-Length` that the last chunk alone matches while the whole would pass it.
 *
 * @returns `failed(error)`, to call when the handler failed (Express passed `error` to the error
 *   handlers): while buffering, the handler's part is dropped and `error` is recorded with the error answer
 *   (so a `NonRetryableError` marks the key FAILED); once the response is streaming (`pass-through` past the
 *   cap) no error answer can follow, Express destroys the connection and never ends the response, so the
 *   claimed request finishes at once as a failure (released, or FAILED for a non-retryable `error`).
 */
export function captureNodeResponse(
  res: ServerResponse,
  claimed: ClaimedRequest,
): { failed(error: unknown): void } {
  const { maxResponseBytes, onResponseTooLarge } = claimed.options;
  const original = {
    writeHead: res.writeHead,
    write: res.write as (...args: unknown[]) => boolean,
    end: res.end as (...args: unknown[]) => ServerResponse,
  };
  // Set by the middleware before this one (CORS...): kept on an answer that replaces the handler's.
  const before = headersBefore(res.getHeaders());
  const chunks: Buffer[] = [];
  let bytes = 0;
  // The status the buffered chunks were written under (the handler's `writeHead` or first `write`).
  let bodyStatus: number | undefined;
  // buffer: capturing; through: streaming the handler's writes (pass-through); dropped: the handler's
  // writes are discarded (fail); sent: our own answer went out, later writes are discarded.
  let mode: 'buffer' | 'through' | 'dropped' | 'sent' = 'buffer';
  // The error the handler failed with, when `failed` was told (recorded with a 5xx error answer).
  let failure: { error: unknown } | undefined;

  const add = (chunk: Chunk | undefined, encoding: BufferEncoding | undefined) => {
    if (chunk === undefined || chunk === null) return;
    bodyStatus ??= res.statusCode;
    const buffer = typeof chunk === 'string' ? Buffer.from(chunk, encoding ?? 'utf8') : Buffer.from(chunk);
    chunks.push(buffer);
    bytes += buffer.length;
  };
  // Forgets what the handler wrote: an error answer replaces it.
  const dropHandlerPart = () => {
    chunks.length = 0;
    bytes = 0;
    bodyStatus = undefined;
  };
  const send = (answer: HttpAnswer | undefined, body: Buffer, callback?: WriteCallback) => {
    mode = 'sent';
    if (answer) {
      res.statusCode = answer.status;
      replaceHeaders(res, withHeadersBefore(before, answer).headers);
    }
    original.end.call(res, answer ? answer.body : body, callback);
  };
  const overflow = () => {
    // A 5xx body is never stored (the key is released), so it streams on whatever the policy.
    if (onResponseTooLarge === 'pass-through' || res.statusCode >= 500) {
      mode = 'through';
      const head = Buffer.concat(chunks);
      chunks.length = 0;
      original.write.call(res, head);
      return;
    }
    mode = 'dropped';
    void claimed
      .finish({ status: res.statusCode, headers: res.getHeaders(), body: undefined, bytes })
      .then((answer) => send(answer, Buffer.alloc(0)));
  };

  res.writeHead = function writeHead(this: ServerResponse, status: number, ...rest: unknown[]) {
    if (mode === 'through' || (mode === 'sent' && !res.headersSent)) {
      return original.writeHead.call(this, status, ...(rest as []));
    }
    if (mode !== 'buffer') return res;
    // Keep status and headers on `res` until the record is written; Node sends them with the body.
    res.statusCode = status;
    bodyStatus ??= status;
    if (typeof rest[0] === 'string') res.statusMessage = rest[0];
    const last = rest[rest.length - 1];
    if (Array.isArray(last)) {
      const pairs: unknown[] = Array.isArray(last[0]) ? last : toPairs(last);
      for (const [name, value] of pairs as [string, string][]) res.setHeader(name, value);
    } else if (last && typeof last === 'object') {
      for (const [name, value] of Object.entries(last)) {
        if (value !== undefined) res.setHeader(name, value as string);
      }
    }
    return res;
  } as ServerResponse['writeHead'];

  res.write = function write(this: ServerResponse, chunk: Chunk, ...rest: unknown[]) {
    if (mode === 'through') return original.write.call(this, chunk, ...rest);
    const { encoding, callback } = writeArgs(rest);
    if (mode === 'buffer') {
      add(chunk, encoding);
      if (bytes > maxResponseBytes) overflow();
    }
    if (callback) process.nextTick(callback);
    return true;
  } as ServerResponse['write'];

  res.end = function end(this: ServerResponse, ...args: unknown[]) {
    const chunk = typeof args[0] === 'function' ? undefined : (args[0] as Chunk | undefined);
    const { encoding, callback } = writeArgs(typeof args[0] === 'function' ? args : args.slice(1));
    if (mode === 'through') {
      mode = 'sent';
      const finished = { status: res.statusCode, headers: res.getHeaders(), body: undefined, bytes };
      original.end.call(res, chunk, encoding, callback);
      void claimed.finish(finished);
      return this;
    }
    if (mode !== 'buffer') {
      if (callback) process.nextTick(callback);
      return this;
    }
    const last =
      chunk === undefined || chunk === null
        ? 0
        : typeof chunk === 'string'
          ? Buffer.byteLength(chunk, encoding ?? 'utf8')
          : chunk.byteLength;
    const declared = Number(res.getHeader('content-length') ?? Number.NaN);
    if (
      (bodyStatus !== undefined && res.statusCode !== bodyStatus) ||
      (bytes > 0 && last === declared && bytes + last > declared)
    ) {
      // The handler started a response, then something answered anew: an error handler (Express'
      // finalhandler, or a custom one), which saw `headersSent` false because nothing was sent yet. It
      // shows as another status, or (same status, such as a handler that set 500 itself) as a
      // Content-Length its answer alone fills. Without this middleware the handler's part would have gone
      // out under its status; sent before the error answer, past the error's Content-Length, it would
      // corrupt the connection.
      dropHandlerPart();
    }
    add(chunk, encoding);
    if (bytes > maxResponseBytes && onResponseTooLarge === 'fail' && res.statusCode < 500) {
      overflow();
      return this;
    }
    mode = 'dropped';
    const body = Buffer.concat(chunks);
    const ended = { status: res.statusCode, headers: res.getHeaders() };
    void claimed.finish({ ...ended, body, bytes, error: failure?.error }).then((answer) => {
      if (!answer) restoreHead(res, ended.status, ended.headers);
      send(answer, body, callback);
    });
    return this;
  } as ServerResponse['end'];

  return {
    failed(error) {
      if (mode === 'buffer') {
        // The error handlers answer next (`headersSent` is false): their answer alone is recorded and sent.
        failure = { error };
        dropHandlerPart();
      } else if (mode === 'through') {
        // Part of the body went out: Express cannot answer the error and destroys the connection without
        // ending the response, so `end` never comes; without this the claim would be held, and
        // heartbeated, for as long as the process lives. Writes and an `end` still pass through.
        void claimed.finish({
          status: res.statusCode,
          headers: res.getHeaders(),
          body: undefined,
          bytes,
          error,
          failed: true,
        });
      }
      // dropped, sent: the claimed request is finishing already.
    },
  };
}

/**
 * Puts back the status and headers a response had when the handler ended it. A handler that answers again
 * while the record is written (a second `res.json`, which throws `ERR_HTTP_HEADERS_SENT` without the
 * middleware) sees nothing sent yet and sets its own: its `Content-Length` would go out with the first
 * body, and the client would wait for the rest until the connection closed, then fail.
 */
function restoreHead(res: ServerResponse, status: number, headers: OutgoingHeaders): void {
  res.statusCode = status;
  for (const name of res.getHeaderNames()) if (!(name in headers)) res.removeHeader(name);
  for (const [name, value] of Object.entries(headers)) {
    if (value !== undefined && res.getHeader(name) !== value) res.setHeader(name, value);
  }
}

function writeArgs(rest: unknown[]): {
  encoding: BufferEncoding | undefined;
  callback: WriteCallback | undefined;
} {
  const [a, b] = rest;
  if (typeof a === 'function') return { encoding: undefined, callback: a as WriteCallback };
  return {
    encoding: typeof a === 'string' ? (a as BufferEncoding) : undefined,
    callback: typeof b === 'function' ? (b as WriteCallback) : undefined,
  };
}

function toPairs(flat: unknown[]): [unknown, unknown][] {
  const pairs: [unknown, unknown][] = [];
  for (let i = 0; i + 1 < flat.length; i += 2) pairs.push([flat[i], flat[i + 1]]);
  return pairs;
}
