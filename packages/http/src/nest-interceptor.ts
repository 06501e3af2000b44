import type { ServerResponse } from 'node:http';
import type { HandlerContext, Idempotency } from '@idempotent-consumer/core';
import type { CallHandler, ExecutionContext, NestInterceptor } from '@nestjs/common';
import type { Reflector } from '@nestjs/core';
import { catchError, finalize, type Observable, of, throwError } from 'rxjs';
import type { ClaimedRequest } from './claimed-request';
import { clientGoneSignal } from './client-gone';
import { HttpIdempotency } from './http-idempotency';
import { IDEMPOTENT_ROUTE, type IdempotentRouteOptions, type NestHttpRequest, nestRoute } from './nest-route';
import { answerInstead } from './node-answer';
import { hasBody } from './node-request';
import { captureNodeResponse } from './node-response-capture';
import { type HttpIdempotencyOptions, resolveHttpOptions } from './options';

/** What the interceptor needs: the runner, and the options of every route (a route's own go over them). */
export interface NestIdempotencyOptions<Req extends NestHttpRequest = NestHttpRequest>
  extends HttpIdempotencyOptions<Req> {
  /** The runner whose store keeps the records. */
  readonly idempotency: Idempotency;
}

/** A platform request with the claim the interceptor sets on it. */
type ClaimedNestRequest = NestHttpRequest & { idempotency?: HandlerContext };

/**
 * The NestJS interceptor of the `Idempotency-Key` header, on Nest's Express and Fastify platforms.
 * `IdempotencyModule` installs it for every route; a route's {@link Idempotent} mark covers it with its own
 * options, or never (`false`); other routes are covered by `methods` and `routes`.
 *
 * It runs after guards (authentication: `tenant` reads what they set) and the body parser. A covered
 * request with a key is claimed: the first runs the handler, and what Nest then sends (the handler's
 * value, or an exception filter's answer to its error) is captured on the raw response, stored, and only
 * then sent; later ones get the stored bytes replayed with `Idempotent-Replayed: true`, or a problem
 * answer (400, 409 + `Retry-After`, 415, 422, 503 + `Retry-After`), sent in place of what Nest sends. 5xx
 * answers release the key; an error whose `retryable` is `false` answered 5xx records it FAILED. The
 * claim is on the request: `req.idempotency`.
 */
export class IdempotencyInterceptor implements NestInterceptor {
  readonly #http: HttpIdempotency<NestHttpRequest>;
  /** Per route options object, its resolved binding (module options under the route's). */
  readonly #routes = new WeakMap<object, HttpIdempotency<NestHttpRequest>>();

  constructor(
    private readonly reflector: Reflector,
    private readonly options: NestIdempotencyOptions<NestHttpRequest>,
  ) {
    const { idempotency, ...httpOptions } = options;
    this.#http = new HttpIdempotency(idempotency, resolveHttpOptions(httpOptions));
  }

  /** Claims, answers or passes the request; see the class description. */
  async intercept(context: ExecutionContext, next: CallHandler): Promise<Observable<unknown>> {
    if (context.getType() !== 'http') return next.handle();
    const mark = this.reflector.getAllAndOverride<IdempotentRouteOptions | false | undefined>(
      IDEMPOTENT_ROUTE,
      [context.getHandler(), context.getClass()],
    );
    const http = context.switchToHttp();
    const request = http.getRequest<ClaimedNestRequest>();
    const where = nestRoute(request);
    if (mark === false || where === undefined) return next.handle();
    const reply = http.getResponse<ServerResponse | { raw: ServerResponse }>();
    const raw = 'raw' in reply ? reply.raw : reply;
    const binding = mark ? this.#routeBinding(mark) : this.#http;
    const admission = await binding.admit({
      request,
      signal: clientGoneSignal(raw),
      method: request.method,
      route: where.route,
      target: where.target,
      headers: request.headers,
      body: request.body,
      unparsedBody: request.body === undefined && hasBody(request.headers),
      routeConfig: mark ? { required: binding.options.required } : undefined,
    });
    if (admission.kind === 'pass') return next.handle();
    if (admission.kind === 'answer') {
      // Nest still sends a value (an empty one): the answer goes out in its place.
      answerInstead(raw, admission.answer);
      return of(undefined);
    }
    request.idempotency = admission.claimed.context;
    return this.#run(admission.claimed, raw, next);
  }

  /** Runs the handler of a claimed request, its answer captured on `raw` and stored before it is sent. */
  #run(claimed: ClaimedRequest, raw: ServerResponse, next: CallHandler): Observable<unknown> {
    const capture = captureNodeResponse(raw, claimed);
    return next.handle().pipe(
      catchError((error: unknown) => {
        // An exception filter answers next: that answer alone is stored, with this error (FAILED for a
        // non-retryable one answered 5xx).
        capture.failed(error);
        return throwError(() => error);
      }),
      finalize(() => {
        // Nest sends nothing to a client that went away: the handler ran, so the key completes without a
        // stored response, as when a client leaves before a body stream ended.
        setImmediate(() => {
          if (raw.destroyed && !raw.writableEnded) {
            const headers = raw.getHeaders();
            void claimed.finish({
              status: raw.statusCode,
              headers,
              body: undefined,
              bytes: 0,
              uncaptured: true,
            });
          }
        });
      }),
    );
  }

  /** The binding of a route's options, over the module's; one per options object. */
  #routeBinding(route: IdempotentRouteOptions): HttpIdempotency<NestHttpRequest> {
    let binding = this.#routes.get(route);
    if (!binding) {
      const { idempotency, ...moduleOptions } = this.options;
      binding = new HttpIdempotency(idempotency, resolveHttpOptions({ ...moduleOptions, ...route }));
      this.#routes.set(route, binding);
    }
    return binding;
  }
}
