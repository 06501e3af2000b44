import { InvalidOptionError } from '@idempotent-consumer/core';
import { DEFAULT_REPLAY_HEADERS } from './stored-response';

/** What happens to a response whose body is larger than `maxResponseBytes`. */
export type ResponseTooLargePolicy = 'fail' | 'pass-through';

/**
 * Options of every binding (Express middleware, Fastify plugin, Hono middleware, fetch wrapper, NestJS
 * module), the same for all. Every field has a default; see each `@defaultValue`. `Req` is the
 * framework's request type (Hono: its `Context`; fetch: the `Request`).
 */
export interface HttpIdempotencyOptions<Req = unknown> {
  /**
   * HTTP methods covered (any case); requests with other methods pass untouched.
   * @defaultValue `['POST', 'PATCH']`
   */
  methods?: readonly string[];
  /**
   * Route templates covered, mount path included (Express: the mount paths of the routers and sub-apps
   * as written, then `req.route.path`; Fastify: `request.routeOptions.url`, prefix included), such as
   * `/api/orders/:id`, or a predicate on the template and method. @defaultValue every route
   */
  routes?: readonly string[] | ((route: string, method: string) => boolean);
  /**
   * Whether a covered request must carry an `Idempotency-Key`: without one it is answered 400
   * (`missing-idempotency-key`). When false, a request without the header runs without idempotency.
   * @defaultValue false
   */
  required?: boolean;
  /**
   * The tenant a request belongs to, added to the scope so that two tenants' equal keys never share a
   * record. Return the identity your authentication set from verified credentials (Express `req.user`,
   * Fastify `request.user`), never a header, query parameter or body field the client chooses: with one, a
   * client that names another tenant and sends a key and body that tenant used gets its stored response
   * replayed. `undefined`: no tenant (all clients share the route's scope). A function that throws or
   * rejects fails the request through the framework's error handling. @defaultValue no tenant
   */
  tenant?: (request: Req) => string | undefined | Promise<string | undefined>;
  /**
   * Longest accepted idempotency key, in UTF-8 bytes; longer keys are answered 400. Keep the store's own
   * `maxKeyBytes` above it and above the longest scope: a scope the store refuses is answered 500
   * `scope-refused`. @defaultValue 255
   */
  maxKeyBytes?: number;
  /**
   * Request headers that are part of the payload fingerprint besides the body (names, any case), for
   * example `['content-type']`. @defaultValue none: the body (and the request target, `fingerprintTarget`)
   */
  fingerprintHeaders?: readonly string[];
  /**
   * Whether the request target (path and query, normalised by `normalizeRequestTarget`: percent-encoding,
   * a trailing slash and the order of query parameters do not matter) is part of the payload fingerprint,
   * so that the same key on `/accounts/B/payouts` after `/accounts/A/payouts`, or with another query, is
   * answered 422 `idempotency-key-reused` instead of the first request's replay. Turn it off only for
   * clients that change the target between retries of one request (a cache-busting or signed query
   * parameter): the same key on another path or query of one route is then a replay of the first request,
   * whose side effect the second never gets. @defaultValue true
   */
  fingerprintTarget?: boolean;
  /**
   * Response headers stored and replayed (names, any case). `Set-Cookie` is not replayed unless listed.
   * @defaultValue `content-type`, `content-language`, `content-location`, `location`, `etag`,
   * `last-modified`, `link`
   */
  replayHeaders?: readonly string[];
  /** Header added to every replayed response, with the value `true`. @defaultValue `'Idempotent-Replayed'` */
  replayedHeader?: string;
  /**
   * Largest response body stored for replay, in bytes. The runner's `maxResultBytes` caps the stored form
   * too: the body as UTF-8 text, or base64 (4/3 of its size) when it is not valid UTF-8, plus status and
   * headers, as JSON deflated above `compressAboveBytes`. A body that does not deflate (already
   * compressed, encrypted or random) is stored at about 4/3 of its size when binary, so with both limits at
   * their defaults (65536) such a body above about 48 KiB passes this cap but not the runner's: the
   * runner's `onResultTooLarge` then applies (`'omit'`, its default: the handler's answer is sent and the
   * key completes without it, later requests get 409 `response-not-stored`; `'fail'`: 500
   * `response-too-large`, the key FAILED), and `onResponseNotStored` is called either way. To store every
   * body within this cap, set the runner's `maxResultBytes` to 4/3 of it plus room for the stored headers
   * (about 1 KiB with the default `replayHeaders`). @defaultValue 65536
   */
  maxResponseBytes?: number;
  /**
   * What happens to a response body larger than `maxResponseBytes`, streamed or not (it is buffered up to
   * the cap first): `fail` answers 500 `response-too-large` instead and records the key FAILED (the
   * handler's side effect happened, so it is not run again); that answer keeps the headers the response had
   * when the request was claimed (CORS set by middleware or hooks before it), never the handler's; `pass-through` sends the response as the
   * handler made it (streaming the rest once the cap is passed) and completes the key without a stored
   * response, so later requests with the key get 409 `response-not-stored`. Never silent: `onResponseNotStored`
   * is called either way. @defaultValue `'fail'`
   */
  onResponseTooLarge?: ResponseTooLargePolicy;
  /**
   * Called once whenever a response below 500 was not stored for replay because of its size or how it was
   * sent: its body passed
   * `maxResponseBytes` (either `onResponseTooLarge` policy); its stored form passed the runner's
   * `maxResultBytes` (either `onResultTooLarge` policy: `'omit'` completes the key without it, `'fail'`
   * records it FAILED); or a Fastify handler sent it itself past the capture (`reply.hijack()`, or a client
   * gone before a body stream ended; the key completes without it, `bytes` is then 0: nothing was
   * counted). `scope` and `key` are the record's (`key` as parsed from the header, unquoted); `status`
   * is the handler's; `bytes` the body bytes seen (at least `maxResponseBytes + 1` above that cap).
   * Not called for a response within both limits whose write failed (the store did not take it, or another
   * worker took the key meanwhile: the runner's `storeError` / `leaseLost` events report those), nor for a
   * run without a claim (`storeFailureMode: 'open'`). Errors it throws are ignored. @defaultValue none
   */
  onResponseNotStored?: (info: { scope: string; key: string; status: number; bytes: number }) => void;
  /**
   * `Retry-After` of the 503 answered when the store does not answer (fail closed), in milliseconds,
   * sent rounded up to whole seconds. @defaultValue 1000
   */
  storeUnavailableRetryAfterMs?: number;
  /**
   * Prefix of every problem `type` URI; the problem's slug is appended.
   * @defaultValue `'urn:idempotent-consumer:problem:'`
   */
  problemTypeBaseUri?: string;
  /**
   * How long a request that meets another in flight with the same key waits for that one's outcome, in
   * milliseconds (the runner's `conflictWaitMs`): its completion is replayed, its 5xx lets this request
   * claim and run, its failure answers 409 `idempotency-key-failed`. After the bound (or when the client
   * disconnects) the answer is 409 `request-in-progress` with `Retry-After` from the holder's remaining
   * lease. 0 answers 409 at once. @defaultValue 5000
   */
  conflictWaitMs?: number;
  /** Overrides the runner's `leaseMs` for these requests, in milliseconds. @defaultValue the runner's */
  leaseMs?: number;
  /**
   * Overrides the runner's `maxAttempts` for these requests (5xx answers use attempts).
   * @defaultValue the runner's
   */
  maxAttempts?: number;
}

/** {@link HttpIdempotencyOptions} with defaults applied. */
export interface ResolvedHttpOptions<Req = unknown> {
  readonly methods: ReadonlySet<string>;
  readonly routes: (route: string, method: string) => boolean;
  readonly required: boolean;
  readonly tenant: ((request: Req) => string | undefined | Promise<string | undefined>) | undefined;
  readonly maxKeyBytes: number;
  readonly fingerprintHeaders: readonly string[];
  readonly fingerprintTarget: boolean;
  readonly replayHeaders: ReadonlySet<string>;
  readonly replayedHeader: string;
  readonly maxResponseBytes: number;
  readonly onResponseTooLarge: ResponseTooLargePolicy;
  readonly onResponseNotStored: HttpIdempotencyOptions['onResponseNotStored'];
  readonly storeUnavailableRetryAfterMs: number;
  readonly problemTypeBaseUri: string;
  readonly runOptions: { leaseMs?: number; maxAttempts?: number; conflictWaitMs: number };
}

function positiveInteger(name: string, value: number): number {
  if (!Number.isSafeInteger(value) || value < 1) {
    throw new InvalidOptionError(`${name} must be an integer >= 1, got ${value}`);
  }
  return value;
}

function nonNegativeInteger(name: string, value: number): number {
  if (!Number.isSafeInteger(value) || value < 0) {
    throw new InvalidOptionError(`${name} must be an integer >= 0, got ${value}`);
  }
  return value;
}

/**
 * Applies defaults and checks ranges.
 * @throws {@link @idempotent-consumer/core!InvalidOptionError} when an option is out of range.
 */
export function resolveHttpOptions<Req>(options: HttpIdempotencyOptions<Req> = {}): ResolvedHttpOptions<Req> {
  const routes = options.routes;
  const onResponseTooLarge = options.onResponseTooLarge ?? 'fail';
  if (onResponseTooLarge !== 'fail' && onResponseTooLarge !== 'pass-through') {
    throw new InvalidOptionError(
      `onResponseTooLarge must be 'fail' or 'pass-through', got ${String(onResponseTooLarge)}`,
    );
  }
  const methods = new Set((options.methods ?? ['POST', 'PATCH']).map((m) => m.toUpperCase()));
  const templates = Array.isArray(routes) ? new Set<string>(routes) : undefined;
  return {
    methods,
    routes: typeof routes === 'function' ? routes : templates ? (route) => templates.has(route) : () => true,
    required: options.required ?? false,
    tenant: options.tenant,
    maxKeyBytes: positiveInteger('maxKeyBytes', options.maxKeyBytes ?? 255),
    fingerprintHeaders: (options.fingerprintHeaders ?? []).map((h) => h.toLowerCase()),
    fingerprintTarget: options.fingerprintTarget ?? true,
    replayHeaders: new Set((options.replayHeaders ?? DEFAULT_REPLAY_HEADERS).map((h) => h.toLowerCase())),
    replayedHeader: options.replayedHeader ?? 'Idempotent-Replayed',
    maxResponseBytes: positiveInteger('maxResponseBytes', options.maxResponseBytes ?? 65_536),
    onResponseTooLarge,
    onResponseNotStored: options.onResponseNotStored,
    storeUnavailableRetryAfterMs: positiveInteger(
      'storeUnavailableRetryAfterMs',
      options.storeUnavailableRetryAfterMs ?? 1000,
    ),
    problemTypeBaseUri: options.problemTypeBaseUri ?? 'urn:idempotent-consumer:problem:',
    runOptions: {
      leaseMs: options.leaseMs,
      maxAttempts: options.maxAttempts,
      conflictWaitMs: nonNegativeInteger('conflictWaitMs', options.conflictWaitMs ?? 5000),
    },
  };
}
