import type { ClaimedRequest } from './claimed-request';
import type { HttpAnswer } from './problem';

export type { FinishedResponse } from './finished-response';

/** Request headers as Node gives them: names in lower case, a repeated header as an array. */
export type IncomingHeaders = Readonly<Record<string, string | string[] | undefined>>;

/** What a binding knows about a request when it reaches the idempotency step. */
export interface IncomingRequest<Req> {
  /** The framework's request, passed to the `tenant` option. */
  readonly request: Req;
  readonly method: string;
  /** The route template, such as `/orders/:id` (never the raw URL). */
  readonly route: string;
  /**
   * The request target as received, path and query (Express `req.originalUrl`, Fastify `request.url`, the
   * path and query of a fetch `Request`'s URL): part of the payload fingerprint (normalised, unless
   * `fingerprintTarget` is off), so the same key on `/orders/7` and `/orders/8` (one route template, one
   * scope) or with another query is answered 422, not with the other request's replay.
   */
  readonly target: string;
  /**
   * The request headers, names in lower case (Node's `IncomingMessage.headers`). Read: `idempotency-key`,
   * `content-type` and the `fingerprintHeaders`; a binding may give only those.
   */
  readonly headers: IncomingHeaders;
  /** The parsed body, as the framework's body parser left it (see `requestFingerprint`). */
  readonly body: unknown;
  /**
   * Reads the body instead of `body`, once the request is to be claimed (covered, with a valid key), so
   * that a request that passes untouched is never read here (a fetch binding reads it itself).
   */
  readonly loadBody?: () => Promise<unknown>;
  /**
   * True when the request has a body that the framework did not parse (`body` is then `undefined`): a
   * covered request with a key is answered 415, since its payload cannot be fingerprinted.
   */
  readonly unparsedBody?: boolean;
  /** Aborts when the client is gone: a wait for another request's outcome then ends at once. */
  readonly signal?: AbortSignal;
  /** A per-route setting: covered whatever `methods` and `routes` say, with this `required`. */
  readonly routeConfig?: { readonly required?: boolean };
}

/** What to do with a request. */
export type Admission =
  /** Not covered, or no key on a route that does not require one: run the handler untouched. */
  | { readonly kind: 'pass' }
  /** Answer this (an error problem, or the replay of a stored response); the handler does not run. */
  | { readonly kind: 'answer'; readonly answer: HttpAnswer }
  /** The key is claimed (or the store is down and fail-open): run the handler, then `claimed.finish`. */
  | {
      readonly kind: 'run';
      readonly claimed: ClaimedRequest;
      /** @deprecated The same object as `claimed`, under its former name. */
      readonly exchange: ClaimedRequest;
    };
