/**
 * `@idempotent-consumer/http/fastify`: the `Idempotency-Key` plugin for Fastify 5.
 * @packageDocumentation
 */
import { type HandlerContext, type Idempotency, InvalidOptionError } from '@idempotent-consumer/core';
import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { claimFastifyRequest } from './fastify-claim';
import { ClaimPlacement } from './fastify-claim-placement';
import { recordFastifyError, storeOnSend } from './fastify-on-send';
import { handlerReturned } from './fastify-reply-guards';
import type { FastifyPluginState } from './fastify-state';
import { HttpIdempotency } from './http-idempotency';
import { type HttpIdempotencyOptions, resolveHttpOptions } from './options';

/** Per-route setting, in the route's `config.idempotency`. */
export interface RouteIdempotencyConfig {
  /**
   * Whether the route requires an `Idempotency-Key` (400 without one). A route with this object is covered
   * whatever the plugin's `methods` and `routes` say. @defaultValue the plugin's `required`
   */
  readonly required?: boolean;
}

declare module 'fastify' {
  interface FastifyRequest {
    /**
     * Set by the `@idempotent-consumer/http` plugin while a claimed request runs: the claim's fencing token
     * and attempt, `ACQUIRED`/`ACQUIRED_STALE` (or `UNPROTECTED` when the store is down and the runner
     * fails open), and a `signal` that aborts when the lease is lost. `undefined` on requests the plugin
     * passed untouched.
     */
    idempotency?: HandlerContext;
  }
  interface FastifyContextConfig {
    /** `false`: the route is never covered; an object: always covered, see {@link RouteIdempotencyConfig}. */
    idempotency?: false | RouteIdempotencyConfig;
  }
}

/** Options of {@link fastifyIdempotency}: the runner, and the options shared with the Express middleware. */
export interface FastifyIdempotencyOptions extends HttpIdempotencyOptions<FastifyRequest> {
  /** The runner whose store keeps the records. */
  readonly idempotency: Idempotency;
}

/**
 * Fastify plugin for the `Idempotency-Key` request header (IETF HTTPAPI draft "The Idempotency-Key HTTP
 * Header Field"), registered without encapsulation (`fastify-plugin`) so it covers the routes of the
 * instance it is registered on. The scope of a key is the method, the route template
 * (`request.routeOptions.url`, never the raw URL) and the `tenant`.
 *
 * Right before the route's handler, after its own `preHandler` hooks (authentication: see
 * `ClaimPlacement`; a route registered before the plugin is claimed in the instance's `preHandler`), a
 * covered request with a key is claimed: the first
 * runs the handler; later ones get the stored response replayed with `Idempotent-Replayed: true`, or a
 * problem answer (400, 409 + `Retry-After`, 422, 503 + `Retry-After`). In `onSend` the handler's
 * response is stored (5xx answers and thrown errors release the key) before it is sent. The package README
 * lists every outcome.
 *
 * @throws {@link @idempotent-consumer/core!InvalidOptionError} at registration when `idempotency` is missing or an option is out of
 *   range.
 * @example
 * ```ts
 * await app.register(fastifyIdempotency, { idempotency, required: true });
 * app.post('/orders', async (request, reply) => {
 *   const order = await orders.create(request.body, { fencingToken: request.idempotency?.fencingToken });
 *   return reply.code(201).header('location', `/orders/${order.id}`).send(order);
 * });
 * ```
 */
const plugin: FastifyPluginAsync<FastifyIdempotencyOptions> = async (fastify, options) => {
  const { idempotency, ...httpOptions } = options;
  if (!idempotency) throw new InvalidOptionError('fastifyIdempotency needs { idempotency }');
  const state: FastifyPluginState = {
    http: new HttpIdempotency<FastifyRequest>(idempotency, resolveHttpOptions(httpOptions)),
    inFlight: new WeakMap(),
    answering: new WeakSet(),
    untyped: new WeakMap(),
  };
  if (!fastify.hasRequestDecorator('idempotency')) fastify.decorateRequest('idempotency', undefined);

  const placement = new ClaimPlacement();
  const claim = (request: FastifyRequest, reply: FastifyReply) => claimFastifyRequest(state, request, reply);
  const returned = (request: FastifyRequest, reply: FastifyReply, payload: unknown) =>
    handlerReturned(state, request, reply, payload);
  fastify.addHook('onRoute', (routeOptions) => placement.place(routeOptions, claim, returned));
  // A route registered before the plugin is not seen by onRoute: the instance hook claims for it.
  const early = { logger: idempotency.logger, warned: new Set<string>() };
  fastify.addHook('preHandler', async (request, reply) => {
    if (!placement.placed(request)) return claimFastifyRequest(state, request, reply, early);
  });
  fastify.addHook('onError', async (request, _reply, error) => recordFastifyError(state, request, error));
  fastify.addHook('onSend', (request, reply, sent: unknown) => storeOnSend(state, request, reply, sent));
};

/**
 * The Fastify plugin; register it with `app.register(fastifyIdempotency, { idempotency, ...options })`.
 * See the description of the plugin function above for what it does.
 */
export const fastifyIdempotency = fp(plugin, { name: '@idempotent-consumer/http', fastify: '5.x' });
