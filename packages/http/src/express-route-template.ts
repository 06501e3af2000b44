import type { Request } from 'express';

/** An Express 4 or 5 app, as far as its router is read. */
export interface ExpressApp {
  /** Express 4's router (its `router` getter throws). */
  readonly _router?: ExpressRouter;
  /** Express 5's router. */
  readonly router?: ExpressRouter;
  /** The app this one is mounted in (`app.use(path, subApp)`). */
  readonly parent?: ExpressApp;
}

/** A router of Express 4, or of the `router` package of Express 5, as far as it is read here. */
interface ExpressRouter {
  readonly stack?: unknown;
  readonly caseSensitive?: unknown;
}

/** A layer of a router's stack: a route, a router or sub-app mounted at a path, or a middleware. */
interface Layer {
  readonly route?: unknown;
  readonly handle?: { readonly stack?: unknown; readonly name?: unknown };
  /** Express 4 and `router` before 2.3: what the last `match` matched, and the parameters' names. */
  readonly path?: unknown;
  readonly keys?: unknown;
  /** `router` 2.3+: `{ path, keys, pattern }` or false; before: true or false (the match kept on the layer). */
  match?(path: string): unknown;
}

/** What a mount layer matched of a path. */
interface Mounted {
  /** The rest of the path, as the router hands it to what is mounted. */
  readonly rest: string;
  /** The matched part as it goes into `req.baseUrl` (no trailing slash). */
  readonly concrete: string;
  /** The matched part as it goes into the template. */
  readonly template: string;
}

/** What the search looks for: the route a request reached, and the mount path it reached it through. */
interface Target {
  readonly route: unknown;
  readonly baseUrl: string;
  /** The apps from the outermost to the request's (`req.app`), which sub-app mounts lead into. */
  readonly apps: readonly ExpressApp[];
}

/** An app's router: Express 4's `_router`, Express 5's `router`. */
export function appRouter(app: ExpressApp): ExpressRouter | undefined {
  // Express 4 has `_router` (its `router` getter throws); Express 5 has `router` only.
  return app._router ?? app.router;
}

/**
 * The route template of a request inside an Express route: the path templates of the routers and sub-apps
 * it was mounted below, followed by `req.route.path`, such as `/api/orders/:id` for
 * `app.use('/api', router)` and `router.post('/orders/:id', ...)`. `req.baseUrl` is the mount path as the
 * request spelled it (`/API` for a request to `/API/orders/7`, which Express routes to the same route by
 * default), so it would make two scopes of one route; this is the template that matched, as Fastify's
 * `request.routeOptions.url` is.
 *
 * The mount templates are found by matching the request's path through the routers' stacks again, from
 * the outermost app, to the layer of `req.route` (`req.baseUrl` must come out the same). A mount's
 * template is its path as written where the router keeps it (the `router` package 2.3+, Express 5). Express
 * 4 and earlier Express 5 routers do not keep it: there a mount path without parameters is taken as
 * matched, in lower case unless its router is case-sensitive (`case sensitive routing`,
 * `Router({ caseSensitive: true })`), and one with parameters as matched (their values kept: never two
 * mounts in one scope, at worst one per value). When the search finds nothing (a middleware rewrote
 * `req.url`, Express internals of another shape), `req.baseUrl` is taken as it is.
 *
 * Call it only when `req.route` is set.
 */
export function expressRouteTemplate(req: Request): string {
  const route = String(req.route.path);
  if (req.baseUrl === '') return route;
  let mount: string | undefined;
  try {
    mount = mountTemplate(req);
  } catch {
    mount = undefined; // Express internals of another shape
  }
  return `${mount ?? req.baseUrl}${route}`;
}

function mountTemplate(req: Request): string | undefined {
  const apps: ExpressApp[] = [];
  for (let app = req.app as ExpressApp | undefined; app; app = app.parent) apps.unshift(app);
  const url = req.originalUrl;
  const end = url.indexOf('?');
  const path = end === -1 ? url : url.slice(0, end);
  if (!path.startsWith('/') || apps.length === 0) return undefined;
  const target: Target = { route: req.route, baseUrl: req.baseUrl, apps };
  return search(target, 0, appRouter(apps[0]!), path, '', '');
}

/**
 * Looks for `target.route` in `router` and what is mounted in it, with `path` left to match below
 * `concrete` (spelled as the request did) and `template` (its template). The first layer that matches
 * wins, as in Express.
 */
function search(
  target: Target,
  depth: number,
  router: ExpressRouter | undefined,
  path: string,
  concrete: string,
  template: string,
): string | undefined {
  const stack = router?.stack;
  if (!Array.isArray(stack)) return undefined;
  for (const layer of stack as Layer[]) {
    if (layer.route !== undefined) {
      if (layer.route === target.route && concrete === target.baseUrl) return template;
      continue;
    }
    const child = mountedRouter(layer, target.apps, depth);
    if (!child) continue;
    const mounted = matchMount(layer, path, router!);
    if (!mounted || !target.baseUrl.startsWith(concrete + mounted.concrete)) continue;
    const found = search(
      target,
      child.depth,
      child.router,
      mounted.rest,
      concrete + mounted.concrete,
      template + mounted.template,
    );
    if (found !== undefined) return found;
  }
  return undefined;
}

/**
 * The router mounted by a layer: a router itself, or the router of the next app towards `req.app` for a
 * sub-app (Express mounts one through a function named `mounted_app`, which hides the app).
 */
function mountedRouter(
  layer: Layer,
  apps: readonly ExpressApp[],
  depth: number,
): { router: ExpressRouter; depth: number } | undefined {
  const handle = layer.handle;
  if (Array.isArray(handle?.stack)) return { router: handle as ExpressRouter, depth };
  const app = apps[depth + 1];
  if (handle?.name !== 'mounted_app' || !app) return undefined;
  const router = appRouter(app);
  return router ? { router, depth: depth + 1 } : undefined;
}

/** Matches a mount layer against `path` and trims what it matched, as the router does. */
function matchMount(layer: Layer, path: string, router: ExpressRouter): Mounted | undefined {
  let result: unknown;
  try {
    result = layer.match?.(path);
  } catch {
    return undefined; // a parameter that does not decode: Express does not route through it either
  }
  if (!result) return undefined;
  // `router` 2.3+ returns the match; Express 4 and earlier routers keep it on the layer.
  const match = (typeof result === 'object' ? result : layer) as { path?: unknown; keys?: unknown };
  const matched = match.path;
  if (typeof matched !== 'string') return undefined;
  if (matched !== '' && !(path.startsWith(matched) && (path[matched.length] ?? '/') === '/'))
    return undefined;
  const rest = path.slice(matched.length);
  const concrete = matched.endsWith('/') ? matched.slice(0, -1) : matched;
  const pattern = (result as { pattern?: unknown }).pattern;
  let template: string;
  if (typeof pattern === 'string') template = pattern.replace(/\/+$/, '');
  else if ((Array.isArray(match.keys) && match.keys.length > 0) || router.caseSensitive) template = concrete;
  else template = concrete.toLowerCase();
  return { rest: rest.startsWith('/') ? rest : `/${rest}`, concrete, template };
}
