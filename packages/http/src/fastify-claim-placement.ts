import type { FastifyReply, FastifyRequest, RouteOptions } from 'fastify';

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
 */
export class ClaimPlacement {
  /** The plugin's `onRoute` hook: appends `claim` to the route's `preHandler` hooks and marks its config. */
  place(
    routeOptions: RouteOptions,
    claim: (request: FastifyRequest, reply: FastifyReply) => Promise<unknown>,
  ): void {
    const last: PreHandler = (request, reply) => claim(request, reply);
    const own = routeOptions.preHandler;
    routeOptions.preHandler = own === undefined ? [last] : [...(Array.isArray(own) ? own : [own]), last];
    routeOptions.config = { ...routeOptions.config, [CLAIMS_LAST]: true } as RouteOptions['config'];
  }

  /** Whether the request's route claims in its own last `preHandler` (registered after the plugin). */
  placed(request: FastifyRequest): boolean {
    const config = request.routeOptions.config as unknown as Record<PropertyKey, unknown> | undefined;
    return config?.[CLAIMS_LAST] === true;
  }
}
