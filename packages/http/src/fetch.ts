/**
 * `@idempotent-consumer/http/fetch`: the `Idempotency-Key` header for any Web-standard fetch handler,
 * `(request: Request) => Promise<Response>`: Next.js route handlers, Bun's and Deno's servers, Cloudflare
 * Workers.
 * @packageDocumentation
 */
import { type HandlerContext, type Idempotency, InvalidOptionError } from '@idempotent-consumer/core';
import { fetchBody, fetchHeaders, fetchTarget } from './fetch-request';
import { answerResponse, finishFetchResponse } from './fetch-response';
import { HttpIdempotency } from './http-idempotency';
import { type HttpIdempotencyOptions, resolveHttpOptions } from './options';

/** Options of {@link withIdempotency}: the runner, the route, and the options every binding shares. */
export interface FetchIdempotencyOptions<R extends Request = Request> extends HttpIdempotencyOptions<R> {
  /** The runner whose store keeps the records. */
  readonly idempotency: Idempotency;
  /**
   * The route template the handler serves, part of the scope: a file route's path (`/api/orders/[id]`) or
   * a function of the request. Never the raw URL: the request target is fingerprinted, not scoped.
   */
  readonly route: string | ((request: R) => string);
}

/** The claim of each request a wrapped handler runs claimed. */
const contexts = new WeakMap<Request, HandlerContext>();

/**
 * The claim of a request inside a handler wrapped by {@link withIdempotency}: its fencing token and
 * attempt, `ACQUIRED`/`ACQUIRED_STALE` (or `UNPROTECTED` when the store is down and the runner fails
 * open), and a `signal` that aborts when the lease is lost. `undefined` for a request that passed
 * untouched (not covered, or no key on a route that does not require one).
 */
export function idempotencyOf(request: Request): HandlerContext | undefined {
  return contexts.get(request);
}

/**
 * Wraps a fetch handler with the `Idempotency-Key` header (IETF HTTPAPI draft "The Idempotency-Key HTTP
 * Header Field"): the first request with a key runs the handler, whose `Response` is read (up to
 * `maxResponseBytes`) and stored before it is returned; later ones get it replayed with
 * `Idempotent-Replayed: true`, or a problem answer (400, 409 + `Retry-After`, 422, 503 + `Retry-After`).
 * A 5xx answer or a thrown error releases the key; the error is rethrown to the platform. The scope is
 * the method, `route` and the `tenant`.
 *
 * The body is fingerprinted from a clone of the request, so the handler reads it as usual: JSON
 * (`application/json`, `+json`) parsed (key order does not matter), anything else as its bytes. The
 * request's `signal` is the client: a request that waits for another one with its key stops waiting
 * when it aborts. Extra arguments (Next.js' `{ params }`) are passed through.
 *
 * @throws {@link @idempotent-consumer/core!InvalidOptionError} when `idempotency` or `route` is missing,
 *   or an option is out of range.
 * @example
 * ```ts
 * export const POST = withIdempotency(
 *   async (request: Request) => Response.json(await orders.create(await request.json()), { status: 201 }),
 *   { idempotency, route: '/api/orders', required: true },
 * );
 * ```
 */
export function withIdempotency<R extends Request, Args extends unknown[]>(
  handler: (request: R, ...rest: Args) => Response | Promise<Response>,
  options: FetchIdempotencyOptions<R>,
): (request: R, ...rest: Args) => Promise<Response> {
  const { idempotency, route, ...httpOptions } = options ?? {};
  if (!idempotency) throw new InvalidOptionError('withIdempotency needs { idempotency }');
  if (typeof route !== 'string' && typeof route !== 'function')
    throw new InvalidOptionError('withIdempotency needs { route }: the route template it serves');
  const http = new HttpIdempotency<R>(idempotency, resolveHttpOptions(httpOptions));
  return async (request, ...rest) => {
    const headers = fetchHeaders(request.headers, http.options);
    const admission = await http.admit({
      request,
      method: request.method,
      route: typeof route === 'string' ? route : route(request),
      target: fetchTarget(request.url),
      headers,
      body: undefined,
      loadBody: () => readClone(request, headers['content-type'] as string | undefined),
      signal: request.signal,
    });
    if (admission.kind === 'pass') return handler(request, ...rest);
    if (admission.kind === 'answer') return answerResponse(admission.answer);
    const { claimed } = admission;
    contexts.set(request, claimed.context);
    let response: Response;
    try {
      response = await handler(request, ...rest);
    } catch (error) {
      // Released (FAILED when not retryable), and rethrown to the platform, which answers it.
      await claimed.finish({ status: 500, headers: {}, body: undefined, bytes: 0, error, failed: true });
      throw error;
    }
    return finishFetchResponse(claimed, response, { signal: request.signal });
  };
}

/** The request's body for the fingerprint, read from a clone so that the handler can still read it. */
function readClone(request: Request, contentType: string | undefined): Promise<unknown> {
  if (request.body === null) return Promise.resolve(undefined);
  const clone = request.clone();
  return fetchBody(contentType, {
    text: () => clone.text(),
    bytes: async () => new Uint8Array(await clone.arrayBuffer()),
  });
}
