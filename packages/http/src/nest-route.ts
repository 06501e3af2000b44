import type { HandlerContext } from '@idempotent-consumer/core';
import {
  type CustomDecorator,
  createParamDecorator,
  type ExecutionContext,
  SetMetadata,
} from '@nestjs/common';
import type { IncomingHeaders } from './admission';
import type { HttpIdempotencyOptions } from './options';

/**
 * A request as NestJS hands it to the interceptor on either platform (an Express `Request`, a Fastify
 * `FastifyRequest`), as far as the interceptor reads it; `tenant` gets the platform's request itself.
 */
export interface NestHttpRequest {
  /** The request method. */
  readonly method: string;
  /** The request target, path and query. */
  readonly url: string;
  /** The request headers, names in lower case. */
  readonly headers: IncomingHeaders;
  /** The body as the platform's body parser left it. */
  readonly body?: unknown;
  /** Set by an authentication guard or middleware from verified credentials (passport's `req.user`). */
  readonly user?: unknown;
}

/** Options of one route, set with {@link Idempotent}: over the module's, for this route only. */
export type IdempotentRouteOptions<Req extends NestHttpRequest = NestHttpRequest> = Omit<
  HttpIdempotencyOptions<Req>,
  'methods' | 'routes'
>;

/** The metadata key {@link Idempotent} sets. */
export const IDEMPOTENT_ROUTE = '@idempotent-consumer/http:idempotent';

/**
 * Marks a route handler, or every route of a controller, for the idempotency interceptor: with options
 * (or none), the route is covered whatever the module's `methods` and `routes` say, with these options
 * over the module's (`required`, `tenant`, `maxResponseBytes`, `conflictWaitMs`, ...); with `false`, it
 * is never covered. A handler's mark wins over its controller's.
 * @example
 * ```ts
 * @Post('orders')
 * @Idempotent({ required: true })
 * create(@Body() body: CreateOrder) { ... }
 * ```
 */
export function Idempotent<Req extends NestHttpRequest = NestHttpRequest>(
  options: IdempotentRouteOptions<Req> | false = {},
): CustomDecorator<string> {
  return SetMetadata(IDEMPOTENT_ROUTE, options);
}

/**
 * The route template and request target of a request on Nest's Express platform (`req.route.path`,
 * `req.originalUrl`) or Fastify platform (`request.routeOptions.url`, `request.url`); `undefined` when
 * neither is there (not a routed HTTP request).
 */
export function nestRoute(request: unknown): { route: string; target: string } | undefined {
  const express = request as { route?: { path?: unknown }; originalUrl?: string };
  if (typeof express.route?.path === 'string') {
    return { route: express.route.path, target: express.originalUrl ?? (request as NestHttpRequest).url };
  }
  const fastify = request as { routeOptions?: { url?: unknown }; url: string };
  if (typeof fastify.routeOptions?.url === 'string')
    return { route: fastify.routeOptions.url, target: fastify.url };
  return undefined;
}

/**
 * A route handler parameter decorator: the claim of a claimed request (its fencing token and attempt,
 * `ACQUIRED`/`ACQUIRED_STALE`, or `UNPROTECTED` when the store is down and the runner fails open, and a
 * `signal` that aborts when the lease is lost), `undefined` for a request the interceptor passed untouched.
 * @example
 * ```ts
 * create(@Body() body: CreateOrder, @IdempotencyContext() claim?: HandlerContext) { ... }
 * ```
 */
export const IdempotencyContext: () => ParameterDecorator = createParamDecorator(
  (_data: unknown, context: ExecutionContext): HandlerContext | undefined =>
    context.switchToHttp().getRequest<{ idempotency?: HandlerContext }>().idempotency,
);
