/**
 * `@idempotent-consumer/http/express`: the `Idempotency-Key` middleware for Express 4 and 5.
 * @packageDocumentation
 */
import type { HandlerContext, Idempotency, IdempotencyLogger } from '@idempotent-consumer/core';
import { InvalidOptionError } from '@idempotent-consumer/core';
import type { ErrorRequestHandler, NextFunction, Request, RequestHandler, Response } from 'express';
import { clientGoneSignal } from './client-gone';
import { appRouter, type ExpressApp, expressRouteTemplate } from './express-route-template';
import { HttpIdempotency } from './http-idempotency';
import { sendNodeAnswer } from './node-answer';
import { hasBody } from './node-request';
import { captureNodeResponse } from './node-response-capture';
import { type HttpIdempotencyOptions, resolveHttpOptions } from './options';

declare global {
  namespace Express {
    interface Request {
      /**
       * Set by the `@idempotent-consumer/http` middleware while a claimed request runs: the claim's
       * fencing token and attempt, `ACQUIRED`/`ACQUIRED_STALE` (or `UNPROTECTED` when the store is down and
       * the runner fails open), and a `signal` that aborts when the lease is lost. `undefined` on requests
       * the middleware passed untouched.
       */
      idempotency?: HandlerContext;
    }
  }
}

/** Per claimed response: tells its capture that the handler failed (see {@link recordIdempotencyError}). */
const failures = new WeakMap<Response, (error: unknown) => void>();

/** What the middleware needs: the runner whose store keeps the records. */
export interface ExpressIdempotencyDependencies {
  readonly idempotency: Idempotency;
}

/**
 * Express middleware for the `Idempotency-Key` request header (IETF HTTPAPI draft "The Idempotency-Key
 * HTTP Header Field"). Mount it on a route, after the body parser, so that the route template is known:
 * `app.post('/orders', express.json(), idempotent, handler)`. The scope of a key is the method, the route
 * template (the mount paths of the routers and sub-apps it is mounted below as written, then
 * `req.route.path`: `/api/orders/:id` also for a request to `/API/orders/7`; never the raw URL; the package
 * README says how Express 4 differs) and the `tenant`.
 *
 * A covered request with a key is claimed on the runner: the first runs the handler, whose response is
 * captured, stored and then sent; later ones get the stored response replayed with `Idempotent-Replayed:
 * true`, or a problem answer (400, 409 + `Retry-After`, 422, 503 + `Retry-After`). 5xx answers and errors
 * release the key. The package README lists every outcome.
 *
 * Calls `next(error)` with an `InvalidOptionError` when mounted outside a route, and with whatever `tenant`
 * throws. A covered request with a key and a body that no parser before the middleware parsed (another
 * media type) is answered 415 `unsupported-media-type`: its payload could not be fingerprinted.
 *
 * @throws {@link @idempotent-consumer/core!InvalidOptionError} when an option is out of range.
 * @example
 * ```ts
 * const idempotent = createIdempotencyMiddleware({ idempotency }, { required: true });
 * app.post('/orders', express.json(), idempotent, async (req, res) => {
 *   const order = await orders.create(req.body, { fencingToken: req.idempotency?.fencingToken });
 *   res.status(201).location(`/orders/${order.id}`).json(order);
 * });
 * ```
 */
export function createIdempotencyMiddleware(
  dependencies: ExpressIdempotencyDependencies,
  options: HttpIdempotencyOptions<Request> = {},
): RequestHandler {
  if (!dependencies?.idempotency)
    throw new InvalidOptionError('createIdempotencyMiddleware needs { idempotency }');
  const http = new HttpIdempotency<Request>(dependencies.idempotency, resolveHttpOptions(options));
  let checked = false;
  return (req: Request, res: Response, next: NextFunction) => {
    if (!checked) {
      checked = true;
      warnUnlessRecorderMounted(dependencies.idempotency.logger, req);
    }
    handle(http, req, res, next).catch(next);
  };
}

/**
 * Logs a warning (once per middleware: at its first request, when the app's routes and error handlers
 * are mounted) when {@link recordIdempotencyError} is in no stack that an error of this request's route
 * can reach: the app's (its routes and routers too) and those of the apps it is mounted in, where Express
 * hands a sub-app's errors. Without it the middleware never sees a handler's error: a `NonRetryableError`
 * cannot record the key FAILED, and a handler that fails after its response started streaming keeps the
 * key in progress until `handlerTimeoutMs` or the end of its lease. Nothing is logged when the app's
 * router cannot be read (another framework than Express 4 or 5) or the runner logs nothing.
 */
function warnUnlessRecorderMounted(logger: IdempotencyLogger | false, req: Request): void {
  if (!logger) return;
  try {
    if (recorderReachable(req.app) !== false) return;
  } catch {
    return; // Express internals of another shape: no warning rather than a wrong one.
  }
  const route = req.route ? `${req.method} ${expressRouteTemplate(req)}` : req.method;
  logger.warn(
    `idempotent-consumer: recordIdempotencyError is not mounted in the Express app of ${route}: the idempotency middleware does not see a handler's error, so a NonRetryableError cannot record its key FAILED (retries run the handler again), and a handler that fails after its response started streaming keeps its key in progress until handlerTimeoutMs or its lease ends. Mount app.use(recordIdempotencyError) after the routes and before your error handlers.`,
    { route },
  );
}

/**
 * Whether {@link recordIdempotencyError} is in the stack of `app` (Express 4: `app._router`, 5:
 * `app.router`) or of an app it is mounted in (`app.parent`), directly, on a route or in a router
 * mounted there. `undefined` when a router cannot be read.
 */
function recorderReachable(app: ExpressApp | undefined): boolean | undefined {
  const seen = new Set<unknown>();
  for (let current = app; current; current = current.parent) {
    const stack = appRouter(current)?.stack;
    if (!Array.isArray(stack)) return undefined;
    if (stackHolds(stack, seen)) return true;
  }
  return app ? false : undefined;
}

/** Whether a router or route stack holds the recorder, in itself or in a route or router it holds. */
function stackHolds(stack: unknown, seen: Set<unknown>): boolean {
  if (!Array.isArray(stack) || seen.has(stack)) return false;
  seen.add(stack);
  for (const layer of stack as { handle?: { stack?: unknown }; route?: { stack?: unknown } }[]) {
    if (layer?.handle === (recordIdempotencyError as unknown)) return true;
    if (stackHolds(layer?.route?.stack, seen) || stackHolds(layer?.handle?.stack, seen)) return true;
  }
  return false;
}

async function handle(http: HttpIdempotency<Request>, req: Request, res: Response, next: NextFunction) {
  if (!req.route) {
    throw new InvalidOptionError(
      'The idempotency middleware must be mounted on a route (app.post(path, middleware, handler)) to know its template',
    );
  }
  const admission = await http.admit({
    request: req,
    signal: clientGoneSignal(res),
    method: req.method,
    route: expressRouteTemplate(req),
    target: req.originalUrl,
    headers: req.headers,
    body: req.body,
    // No body parser before the middleware took this media type: the payload cannot be fingerprinted.
    unparsedBody: req.body === undefined && hasBody(req.headers),
  });
  if (admission.kind === 'pass') return next();
  if (admission.kind === 'answer') return sendNodeAnswer(res, admission.answer);
  req.idempotency = admission.claimed.context;
  failures.set(res, captureNodeResponse(res, admission.claimed).failed);
  next();
}

/**
 * Express error-handling middleware that tells the idempotency middleware how a claimed request's handler
 * failed, then passes the error on (`next(err)`) to the app's own error handlers, which answer as usual.
 * Mount it after the routes and before your error handlers: `app.use(recordIdempotencyError)` (or last
 * on a route, after its handler).
 *
 * Express hands a thrown error, `next(err)` or (Express 5) a rejected async handler to the error
 * handlers, never to the middleware, which then only sees the 500 answered for it. With this mounted:
 * - an error whose `retryable` is `false` (the core's `NonRetryableError`) records the key FAILED when the
 *   answer is a 5xx, so retries get 409 `idempotency-key-failed` instead of running the handler again
 *   (an error handler that answers 4xx for it completes the key with that answer, replayed);
 * - whatever the handler wrote before it failed is dropped, and the error answer alone is recorded and sent;
 * - a handler that fails after its response started streaming (`onResponseTooLarge: 'pass-through'`, past
 *   `maxResponseBytes`), which Express answers by destroying the connection, releases the key at once
 *   (FAILED for a non-retryable error) instead of holding it while the process lives.
 *
 * Requests the middleware did not claim pass through untouched.
 */
export const recordIdempotencyError: ErrorRequestHandler = (err, _req, res, next) => {
  failures.get(res)?.(err);
  next(err);
};
