/**
 * Error answers as RFC 9457 problem details (`application/problem+json`): a `type` URI, a `title` that
 * never changes for a type, the `status`, and a `detail` about this occurrence.
 */

/** Media type of every error answer (RFC 9457, section 3). */
export const PROBLEM_CONTENT_TYPE = 'application/problem+json';

/**
 * Every problem this package answers with, by slug: its HTTP status and title. The `type` URI is the
 * option `problemTypeBaseUri` followed by the slug.
 */
export const PROBLEMS = {
  /** The route requires an `Idempotency-Key` and the request has none (draft, section 2.7). */
  'missing-idempotency-key': { status: 400, title: 'Idempotency-Key header is required' },
  /** The header is empty, longer than `maxKeyBytes`, or neither a Structured Field string nor a token. */
  'invalid-idempotency-key': { status: 400, title: 'Idempotency-Key header is invalid' },
  /** A request with the same key is still being processed (draft, section 2.7); see `Retry-After`. */
  'request-in-progress': { status: 409, title: 'A request with this Idempotency-Key is in progress' },
  /**
   * Express, NestJS: the request has a body that no body parser before the middleware parsed (its media
   * type is not one the route accepts), so its payload cannot be fingerprinted. The fetch bindings (Hono,
   * fetch handlers) fingerprint any body and never answer it.
   */
  'unsupported-media-type': {
    status: 415,
    title: 'The request body has a media type this route does not parse',
  },
  /** The key was first used with another request payload (draft, section 2.7). */
  'idempotency-key-reused': {
    status: 422,
    title: 'Idempotency-Key was already used with a different request payload',
  },
  /** The key's operation failed for good (attempts exhausted, or a non-retryable error); use a new key. */
  'idempotency-key-failed': { status: 409, title: 'The request with this Idempotency-Key failed for good' },
  /**
   * The key's request completed but its response was not stored: its body passed `maxResponseBytes` under
   * `onResponseTooLarge: 'pass-through'`, its stored form passed the runner's `maxResultBytes` under the
   * runner's `onResultTooLarge: 'omit'`, or a Fastify handler answered past the capture.
   */
  'response-not-stored': {
    status: 409,
    title: 'The request with this Idempotency-Key completed; its response was not stored',
  },
  /**
   * The response was larger than `maxResponseBytes` and `onResponseTooLarge` is `fail`, or its stored form
   * larger than the runner's `maxResultBytes` and the runner's `onResultTooLarge` is `fail`. Sent instead of
   * the handler's response, with the headers the response had when the request was claimed (CORS...).
   */
  'response-too-large': { status: 500, title: 'The response is too large to be stored for replay' },
  /**
   * The store refused the scope this server built for the request (method, route template and tenant, as
   * JSON) as longer than its `maxKeyBytes`. A server error (the client cannot change the scope), logged at
   * `error` through the runner's `logger` (naming the route and the store's reason); nothing was processed.
   * A key the store refuses is the client's: 400 `invalid-idempotency-key`, not logged.
   */
  'scope-refused': { status: 500, title: 'The idempotency scope of this request cannot be stored' },
  /** The idempotency store did not answer (fail closed); see `Retry-After`. */
  'store-unavailable': { status: 503, title: 'The idempotency store is unavailable' },
} as const satisfies Record<string, { status: number; title: string }>;

/** Slug of a {@link PROBLEMS} entry. */
export type ProblemSlug = keyof typeof PROBLEMS;

/** An RFC 9457 problem details object, as sent in the body. */
export interface ProblemDetails {
  /** URI of the problem type: `problemTypeBaseUri` + slug. */
  readonly type: string;
  /** Short summary of the type; the same for every occurrence. */
  readonly title: string;
  /** The HTTP status code of the answer. */
  readonly status: number;
  /** What happened to this request. */
  readonly detail: string;
}

/** A complete answer the adapters send as is: status, headers and body bytes. */
export interface HttpAnswer {
  readonly status: number;
  /**
   * Header names in lower case, values as sent. An array is sent as one header line per value, as
   * `Set-Cookie` must be (its values cannot be joined with commas).
   */
  readonly headers: Readonly<Record<string, string | readonly string[]>>;
  readonly body: Buffer;
}

/**
 * Builds a problem answer.
 * @param retryAfterMs - when given, a `Retry-After` header in whole seconds (rounded up, at least 1).
 */
export function problemAnswer(
  typeBaseUri: string,
  slug: ProblemSlug,
  detail: string,
  retryAfterMs?: number,
): HttpAnswer {
  const { status, title } = PROBLEMS[slug];
  const problem: ProblemDetails = { type: `${typeBaseUri}${slug}`, title, status, detail };
  const headers: Record<string, string> = { 'content-type': PROBLEM_CONTENT_TYPE };
  if (retryAfterMs !== undefined) headers['retry-after'] = String(retryAfterSeconds(retryAfterMs));
  return { status, headers, body: Buffer.from(JSON.stringify(problem)) };
}

/** `Retry-After` delta-seconds for a wait in milliseconds: rounded up, at least 1. */
export function retryAfterSeconds(ms: number): number {
  return Math.max(1, Math.ceil(ms / 1000));
}
