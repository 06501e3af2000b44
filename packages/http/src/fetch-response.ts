import type { FinishedResponse } from './admission';
import type { ClaimedRequest } from './claimed-request';
import type { HttpAnswer } from './problem';
import type { OutgoingHeaders } from './stored-response';
import { bufferWebStream } from './web-stream-buffer';

/** Statuses whose response has no body (a `Response` with one cannot be built). */
const NULL_BODY_STATUSES = new Set([101, 103, 204, 205, 304]);

/** A fetch `Headers` as the rules read response headers: names in lower case, `Set-Cookie` as a list. */
export function responseHeaders(headers: Headers): OutgoingHeaders {
  const out: Record<string, string | readonly string[]> = {};
  headers.forEach((value, name) => {
    if (name !== 'set-cookie') out[name] = value;
  });
  const cookies = headers.getSetCookie();
  if (cookies.length > 0) out['set-cookie'] = cookies;
  return out;
}

/** Headers of an answer, a list as several lines (`Set-Cookie`), over `before` when given. */
export function answerHeaders(answer: { readonly headers: OutgoingHeaders }, before?: Headers): Headers {
  const headers = new Headers(before);
  for (const [name, value] of Object.entries(answer.headers)) {
    if (value === undefined) continue;
    if (typeof value === 'object') {
      headers.delete(name);
      for (const v of value) headers.append(name, v);
    } else headers.set(name, String(value));
  }
  return headers;
}

/** A fetch `Response` of an answer (a replay, a problem, or an answer replacing the handler's). */
export function answerResponse(answer: HttpAnswer, before?: Headers): Response {
  const body = NULL_BODY_STATUSES.has(answer.status) || answer.body.length === 0 ? null : answer.body;
  return new Response(body, { status: answer.status, headers: answerHeaders(answer, before) });
}

/** How {@link finishFetchResponse} finishes. */
export interface FetchFinish {
  /** Aborts when the client went away: a body stream being buffered is then given up on. */
  readonly signal?: AbortSignal;
  /** Headers the response had before the handler ran (Hono's middleware before this one), else none. */
  readonly before?: Headers;
  /** The error the handler failed with, when the framework answered it (Hono's `c.error`). */
  readonly error?: unknown;
}

/**
 * Records a claimed request's fetch `Response` and returns what to send: its body is read up to
 * `maxResponseBytes` and stored with its status and headers before the client sees it (a copy of the
 * `Response` with the bytes read goes out); a 5xx releases the key. A body past the cap: a 5xx streams on
 * (released); `pass-through` streams on and the key completes without a stored response once it ended
 * (released, or FAILED for a non-retryable error, when the stream fails on the way); `fail` answers 500
 * `response-too-large`. The client gone while the body is buffered: the key completes without a stored
 * response (a 5xx releases it), and an empty response is returned, which nobody reads.
 * @throws the body stream's error when it fails within the cap, after releasing the key (or recording it
 *   FAILED for a non-retryable error): the caller's error handling answers it.
 */
export async function finishFetchResponse(
  claimed: ClaimedRequest,
  response: Response,
  how: FetchFinish = {},
): Promise<Response> {
  const head = { status: response.status, headers: responseHeaders(response.headers), error: how.error };
  const init = { status: response.status, statusText: response.statusText, headers: response.headers };
  if (response.body === null) {
    const answer = await claimed.finish({ ...head, body: Buffer.alloc(0), bytes: 0 });
    return answer ? answerResponse(answer, how.before) : response;
  }
  let buffered: Awaited<ReturnType<typeof bufferWebStream>>;
  try {
    buffered = await bufferWebStream(response.body, claimed.options.maxResponseBytes, how.signal);
  } catch (error) {
    if (how.signal?.aborted) {
      await claimed.finish({ ...head, body: undefined, bytes: 0, uncaptured: true });
      return new Response(null, init);
    }
    await claimed.finish({ ...head, status: 500, body: undefined, bytes: 0, error, failed: true });
    throw error;
  }
  if (buffered.complete) {
    const finished: FinishedResponse = { ...head, body: buffered.body, bytes: buffered.body.length };
    const answer = await claimed.finish(finished);
    if (answer) return answerResponse(answer, how.before);
    return new Response(buffered.body.length === 0 ? null : buffered.body, init);
  }
  const finished: FinishedResponse = { ...head, body: undefined, bytes: buffered.bytes };
  if (response.status >= 500) {
    await claimed.finish(finished); // released; the error body streams on
    return new Response(buffered.whole(), init);
  }
  if (claimed.options.onResponseTooLarge === 'pass-through') {
    const done = (failure?: { readonly error: unknown }) =>
      void claimed.finish(failure ? { ...finished, failed: true, error: failure.error } : finished);
    return new Response(buffered.whole(done), init);
  }
  buffered.discard();
  const answer = await claimed.finish(finished);
  return answer ? answerResponse(answer, how.before) : new Response(null, init);
}
