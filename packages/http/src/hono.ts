/**
 * `@idempotent-consumer/http/hono`: the `Idempotency-Key` middleware for Hono 4 (on Node through
 * `@hono/node-server`, Bun, Deno, Cloudflare Workers).
 * @packageDocumentation
 */

import type { ServerResponse } from 'node:http';
import { type HandlerContext, type Idempotency, InvalidOptionError } from '@idempotent-consumer/core';
import type { Context, MiddlewareHandler } from 'hono';
import { clientGoneSignal } from './client-gone';
import { fetchBody, fetchHeaders, fetchTarget } from './fetch-request';
import { finishFetchResponse } from './fetch-response';
import { HttpIdempotency } from './http-idempotency';
import { type HttpIdempotencyOptions, resolveHttpOptions } from './options';

/** Options of {@link honoIdempotency}: the runner, and the options every binding shares. */
export interface HonoIdempotencyOptions extends HttpIdempotencyOptions<Context> {
  /** The runner whose store keeps the records. */
  readonly idempotency: Idempotency;
}

/**
 * The context variable the middleware sets: `c.get('idempotency')` is the claim of a claimed request (its
 * fencing token and attempt, `ACQUIRED`/`ACQUIRED_STALE`, or `UNPROTECTED` when the store is down and
 * the runner fails open, and a `signal` that aborts when the lease is lost), `undefined` otherwise. Type
 * the app with it: `new Hono<{ Variables: IdempotencyVariables }>()`.
 */
export interface IdempotencyVariables {
  idempotency: HandlerContext | undefined;
}

/**
 * Hono middleware for the `Idempotency-Key` request header (IETF HTTPAPI draft "The Idempotency-Key HTTP
 * Header Field"). Mount it after authentication, on the routes it covers (`app.post('/orders',
 * idempotent, handler)`) or for a path (`app.use('/api/*', idempotent)`). The scope of a key is the
 * method, the route template (the path of the last route matched for the request's method, such as
 * `/api/orders/:id`, base paths included; never the raw URL) and the `tenant`.
 *
 * A covered request with a key is claimed: the first runs the handler, whose response (`c.res`, also
 * one an error handler made of a thrown error) is read up to `maxResponseBytes` and stored before it goes
 * out; later ones get it replayed with `Idempotent-Replayed: true`, or a problem answer (400, 409 +
 * `Retry-After`, 422, 503 + `Retry-After`). 5xx answers release the key; a thrown error whose
 * `retryable` is `false` records it FAILED. The body is read through `c.req` (its cache), so the handler
 * reads it again as usual: JSON parsed for the fingerprint (key order does not matter), anything else as
 * its bytes. Headers set before the middleware ran (CORS) stay on every answer it gives.
 *
 * @throws {@link @idempotent-consumer/core!InvalidOptionError} when `idempotency` is missing or an option
 *   is out of range.
 * @example
 * ```ts
 * const app = new Hono<{ Variables: IdempotencyVariables }>();
 * app.post('/orders', honoIdempotency({ idempotency, required: true }), async (c) => {
 *   const order = await orders.create(await c.req.json(), c.get('idempotency')?.fencingToken);
 *   return c.json(order, 201);
 * });
 * ```
 */
export function honoIdempotency(
  options: HonoIdempotencyOptions,
): MiddlewareHandler<{ Variables: IdempotencyVariables }> {
  const { idempotency, ...httpOptions } = options ?? {};
  if (!idempotency) throw new InvalidOptionError('honoIdempotency needs { idempotency }');
  const http = new HttpIdempotency<Context>(idempotency, resolveHttpOptions(httpOptions));
  return async (c, next) => {
    const raw = c.req.raw;
    const headers = fetchHeaders(raw.headers, http.options);
    const gone = clientGone(c);
    const admission = await http.admit({
      request: c,
      method: raw.method,
      route: honoRoute(c),
      target: fetchTarget(raw.url),
      headers,
      body: undefined,
      loadBody: () =>
        fetchBody(headers['content-type'] as string | undefined, {
          text: () => c.req.text(),
          bytes: async () => new Uint8Array(await c.req.arrayBuffer()),
        }),
      signal: gone,
    });
    if (admission.kind === 'pass') return next();
    if (admission.kind === 'answer') {
      const { status, headers: answerHeaders, body } = admission.answer;
      // Through c.body: headers set before the middleware (CORS) stay on the answer.
      return c.body(body as Uint8Array<ArrayBuffer>, status as 200, answerHeaders as Record<string, string>);
    }
    const { claimed } = admission;
    // The headers so far (CORS set by middleware before this one): kept on an answer replacing the handler's.
    const before = new Headers(c.res.headers);
    c.set('idempotency', claimed.context);
    try {
      await next();
    } catch (error) {
      // An error no error handler answered: released (FAILED when not retryable), and rethrown.
      await claimed.finish({ status: 500, headers: {}, body: undefined, bytes: 0, error, failed: true });
      throw error;
    }
    const response = c.res;
    const sent = await finishFetchResponse(claimed, response, { signal: gone, before, error: c.error });
    if (sent !== response) {
      // Replaced whole: the setter would merge the handler's headers into the answer otherwise.
      c.res = undefined;
      c.res = sent;
    }
  };
}

/**
 * The signal of the client going away: on `@hono/node-server`, its connection's (`c.env.outgoing`), one
 * per connection; elsewhere the request's own `signal`. The server's lightweight request builds an
 * `AbortController` for every request whose `signal` is read.
 */
function clientGone(c: Context): AbortSignal {
  const outgoing = (c.env as { outgoing?: ServerResponse } | undefined)?.outgoing;
  return typeof outgoing?.once === 'function' ? clientGoneSignal(outgoing) : c.req.raw.signal;
}

/**
 * The route template of a request in Hono: the path of the last route matched for its method from this
 * middleware on (the handler's route, such as `/api/orders/:id`, base paths included), else the path of
 * the last route matched (a route for every method: `app.all`, `app.on`).
 */
function honoRoute(c: Context): string {
  // The request's own getter, not `hono/route`'s helper: the helper reads a symbol of its own build, so
  // from this CommonJS package it cannot read an app's context built by Hono's ES module build.
  const routes = c.req.matchedRoutes;
  const method = c.req.method;
  for (let i = routes.length - 1; i >= c.req.routeIndex; i--) {
    if (routes[i]!.method === method) return routes[i]!.path;
  }
  return routes.at(-1)?.path ?? c.req.path;
}
