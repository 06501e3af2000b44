import { InvalidOptionError } from '@idempotent-consumer/core';
import type { FastifyReply, FastifyRequest, RouteHandlerMethod, RouteOptions } from 'fastify';

/** The route config entry that says the route claims in its own last `preHandler`. */
const CLAIMS_LAST = Symbol.for('@idempotent-consumer/http.claimsInRoutePreHandler');

type PreHandler = NonNullable<RouteOptions['preHandler']>;

/**
 * Where the Fastify plugin claims a request: right before the route's handler, after every `preHandler`
 * hook of the route. Fastify runs the instance's `preHandler` hooks, then the route's own (an
 * authentication hook, `@fastify/auth`), then the handler. A claim in an instance hook came before the
 * route's hooks: a 401 a route hook answered was stored as the key's response and replayed to the retry
 * with credentials, a stored response was replayed to a request the route's hook would have refused, and
 * a `tenant` read what that hook had not set yet. {@link ClaimPlacement.place}, the plugin's `onRoute`
 * hook, appends the claim as the route's last `preHandler`; `onRoute` sees only the routes registered after
 * the plugin, so for an earlier route ({@link ClaimPlacement.placed} `false`) the instance hook claims.
 *
 * The route's handler is guarded too: should an `onRoute` hook registered after the plugin replace the
 * route's `preHandler` hooks (dropping the claim while the mark stays), the handler does not run unclaimed
 * (every retry would run it again): it fails with an `InvalidOptionError` (a 500) that says why. And the
 * value an async handler resolves with is reported to the plugin (`returned`): Fastify sends nothing for
 * an `undefined` one once the client went away, so the plugin's onSend would never see that answer.
 */
export class ClaimPlacement {
  /** Requests whose route's claim hook ran (claimed, or found not covered). */
  readonly #claimed = new WeakSet<FastifyRequest>();

  /**
   * The plugin's `onRoute` hook: appends `claim` to the route's `preHandler` hooks, marks its config, and
   * guards its handler (see the class description). `returned` is called with the value an async handler
   * resolved with, in a reaction that runs before Fastify's own to that promise (which may send it): to see
   * what Fastify did, `returned` must look later (the plugin's waits for `setImmediate`).
   */
  place(
    routeOptions: RouteOptions,
    claim: (request: FastifyRequest, reply: FastifyReply) => Promise<unknown>,
    returned: (request: FastifyRequest, reply: FastifyReply, payload: unknown) => void,
  ): void {
    const claimed = this.#claimed;
    const last: PreHandler = (request, reply) => {
      claimed.add(request);
      return claim(request, reply);
    };
    const own = routeOptions.preHandler;
    routeOptions.preHandler = own === undefined ? [last] : [...(Array.isArray(own) ? own : [own]), last];
    routeOptions.config = { ...routeOptions.config, [CLAIMS_LAST]: true } as RouteOptions['config'];
    const handler = routeOptions.handler;
    const route = `${String(routeOptions.method)} ${routeOptions.url}`;
    routeOptions.handler = function guarded(this: unknown, request, reply) {
      if (!claimed.has(request)) {
        throw new InvalidOptionError(
          `The idempotency claim of ${route} did not run before its handler: an onRoute hook registered after the idempotency plugin replaced the route's preHandler hooks. Append to them instead, or register that hook before the plugin`,
        );
      }
      const result: unknown = handler.call(this as never, request, reply);
      if (typeof (result as PromiseLike<unknown> | null)?.then === 'function') {
        // A rejection is Fastify's to handle (its error answer goes through onSend); this only watches.
        (result as PromiseLike<unknown>).then(
          (payload) => returned(request, reply, payload),
          () => undefined,
        );
      }
      return result;
    } as RouteHandlerMethod;
  }

  /** Whether the request's route claims in its own last `preHandler` (registered after the plugin). */
  placed(request: FastifyRequest): boolean {
    const config = request.routeOptions.config as unknown as Record<PropertyKey, unknown> | undefined;
    return config?.[CLAIMS_LAST] === true;
  }
}
