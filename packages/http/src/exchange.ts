import {
  type HandlerContext,
  type Idempotency,
  InvalidKeyError,
  ResultTooLargeError,
  type RunResult,
  StoreUnavailableError,
} from '@idempotent-consumer/core';
import { AdapterLog } from '@idempotent-consumer/core/kit';
import { parseIdempotencyKey } from './idempotency-key';
import type { ResolvedHttpOptions } from './options';
import { type HttpAnswer, type ProblemSlug, problemAnswer } from './problem';
import { requestFingerprint } from './request-fingerprint';
import { normalizeRequestTarget } from './request-target';
import { ServerErrorResponse } from './server-error-response';
import { type OutgoingHeaders, replayAnswer, type StoredResponse, storeResponse } from './stored-response';

/** What an adapter knows about a request when it reaches the idempotency step. */
export interface IncomingRequest<Req> {
  /** The framework's request, passed to the `tenant` option. */
  readonly request: Req;
  readonly method: string;
  /** The route template, such as `/orders/:id` (never the raw URL). */
  readonly route: string;
  /**
   * The request target as received, path and query (Express `req.originalUrl`, Fastify `request.url`):
   * part of the payload fingerprint (normalised, unless `fingerprintTarget` is off), so the same key on
   * `/orders/7` and `/orders/8` (one route template, one scope) or with another query is answered 422, not
   * with the other request's replay.
   */
  readonly target: string;
  /** The request headers, names in lower case (Node's `IncomingMessage.headers`). */
  readonly headers: Readonly<Record<string, string | string[] | undefined>>;
  /** The parsed body, as the framework's body parser left it (see `requestFingerprint`). */
  readonly body: unknown;
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
  /** The key is claimed (or the store is down and fail-open): run the handler, then `exchange.finish`. */
  | { readonly kind: 'run'; readonly exchange: Exchange };

/** The response a handler produced, as the adapter captured it. */
export interface FinishedResponse {
  readonly status: number;
  readonly headers: OutgoingHeaders;
  /** The whole body; `undefined` when it passed `maxResponseBytes` and was not buffered to the end. */
  readonly body: Buffer | undefined;
  /** Body bytes seen (at least `maxResponseBytes + 1` when `body` is `undefined`). */
  readonly bytes: number;
  /** The error the handler threw, when the framework reported one (used for 5xx answers). */
  readonly error?: unknown;
  /**
   * The handler failed after its response started going out, so no error answer could replace it (Express
   * then destroys the connection): the key is released as for a 5xx answer, or recorded FAILED when
   * `error` is not retryable.
   */
  readonly failed?: boolean;
  /**
   * The handler sent the response itself, past the capture (Fastify `reply.hijack()`), or the client went
   * away before its body stream ended (Fastify), so there is nothing to store: an answer below 500 completes the key without a stored response whatever
   * `onResponseTooLarge` says (later requests get 409 `response-not-stored`; `onResponseNotStored` is
   * called, with `bytes` 0: nothing was counted); a 5xx releases it.
   */
  readonly uncaptured?: boolean;
}

/** The scope of a request: method, route template and tenant, encoded so that no two collide. */
export function httpScope(method: string, route: string, tenant: string | undefined): string {
  return JSON.stringify(tenant === undefined ? [method, route] : [method, route, tenant]);
}

/**
 * The framework-neutral part of the middleware and the plugin: decides what a request gets (draft "The
 * Idempotency-Key HTTP Header Field", section 2.7) and records how its handler ended, on an
 * {@link Idempotency} runner.
 */
export class HttpIdempotency<Req> {
  /** The runner's `logger` (none when it is `false`): what needs an operator, such as a refused scope. */
  readonly #log: AdapterLog;

  constructor(
    readonly idempotency: Idempotency,
    readonly options: ResolvedHttpOptions<Req>,
  ) {
    this.#log = AdapterLog.for(idempotency, idempotency.logger, 'the idempotency middleware');
  }

  /**
   * Decides what a request gets: pass, an answer, or a claimed run.
   * @throws what the `tenant` function throws, an `InvalidPayloadError` from an unserializable parsed
   *   body, and the runner's `UnexpectedReplyError` and `InvalidOptionError`; the adapters hand them to the
   *   framework's error handling (a 500 by default). Among them `UnreadableResultError`: the key completed
   *   but its stored response cannot be decoded by this version (a newer version's encoding, or corrupt
   *   bytes); the handler does not run again, and an instance that can decode it replays it.
   */
  async admit(incoming: IncomingRequest<Req>): Promise<Admission> {
    const o = this.options;
    const method = incoming.method.toUpperCase();
    const override = incoming.routeConfig;
    if (!override && (!o.methods.has(method) || !o.routes(incoming.route, method))) return { kind: 'pass' };
    const required = override?.required ?? o.required;
    const parsed = parseIdempotencyKey(incoming.headers['idempotency-key'], o.maxKeyBytes);
    if (parsed.kind === 'missing') {
      return required
        ? this.#problem(
            'missing-idempotency-key',
            `${method} ${incoming.route} requires an Idempotency-Key header`,
          )
        : { kind: 'pass' };
    }
    if (parsed.kind === 'invalid') return this.#problem('invalid-idempotency-key', parsed.detail);

    if (incoming.unparsedBody) {
      const type = joinHeader(incoming.headers['content-type']) ?? 'none';
      return this.#problem(
        'unsupported-media-type',
        `The body's media type (${type}) is not parsed by this route, so its payload cannot be fingerprinted`,
      );
    }
    const tenant = o.tenant ? await o.tenant(incoming.request) : undefined;
    const scope = httpScope(method, incoming.route, tenant);
    const key = parsed.key;
    const headers: Record<string, string | undefined> = {};
    for (const name of o.fingerprintHeaders) headers[name] = joinHeader(incoming.headers[name]);
    const target = o.fingerprintTarget ? normalizeRequestTarget(incoming.target) : undefined;
    const fingerprint = requestFingerprint(incoming.body, headers, target);

    const started = deferred<HandlerContext>();
    const response = deferred<StoredResponse | undefined>();
    const result = this.idempotency.run<StoredResponse | undefined>(
      { scope, key, fingerprint },
      (context) => {
        started.resolve(context);
        return response.promise;
      },
      { ...o.runOptions, signal: incoming.signal },
    );
    const first = await Promise.race([
      started.promise.then((context) => ({ context })),
      result.then(
        (settled) => ({ settled }),
        (error: unknown) => ({ error }),
      ),
    ]);
    if ('context' in first) {
      return { kind: 'run', exchange: new Exchange(this.options, first.context, response, result) };
    }
    if ('error' in first) return this.#storeError(first.error, scope, key, `${method} ${incoming.route}`);
    return this.#settled(first.settled);
  }

  #settled(r: RunResult<StoredResponse | undefined>): Admission {
    switch (r.outcome) {
      case 'DUPLICATE': {
        const replay = replayAnswer(r.result, this.options.replayedHeader);
        if (replay) return { kind: 'answer', answer: replay };
        return this.#problem(
          'response-not-stored',
          'The first request with this key completed, but its response was not stored for replay',
        );
      }
      case 'CONFLICT':
        return this.#problem(
          'request-in-progress',
          'Another request with this key is being processed; retry after the Retry-After delay',
          r.retryAfterMs,
        );
      case 'PAYLOAD_MISMATCH':
        return this.#problem(
          'idempotency-key-reused',
          'This key was first used with another request payload; use a new key for a different request',
        );
      case 'FAILED':
        return this.#problem(
          'idempotency-key-failed',
          `The operation for this key was recorded as failed after ${r.attempt} attempt(s); use a new key`,
        );
      default:
        // ACQUIRED, ACQUIRED_STALE and UNPROTECTED start the handler first; they cannot settle here.
        throw new TypeError(`Unexpected run outcome before the handler started: ${r.outcome}`);
    }
  }

  /**
   * The answer to a claim the runner rejected: 503 for a store that did not answer; for an
   * `InvalidKeyError`, 400 when the client's key is refused (the client's mistake: not logged, as the
   * runner logs no refusal of its caller's request) and 500 when the scope this server built is (logged at
   * `error` through the runner's `logger`: an operator must shorten the route or tenant, or raise the
   * store's `maxKeyBytes`). Anything else is rethrown. `route`: `METHOD /route/template`, for the log.
   */
  #storeError(error: unknown, scope: string, key: string, route: string): Admission {
    if (error instanceof StoreUnavailableError) {
      return this.#problem(
        'store-unavailable',
        'The idempotency store did not answer or cannot take writes now; nothing was processed. Retry after the Retry-After delay',
        this.options.storeUnavailableRetryAfterMs,
      );
    }
    if (error instanceof InvalidKeyError) {
      if (keyRefused(scope, key)) return this.#problem('invalid-idempotency-key', error.message);
      this.#log.error(
        `the idempotency store refused the scope built for ${route} (its method, route template and tenant), so the request was answered 500 scope-refused and nothing was processed: ${error.message}. Shorten the route or the tenant, or raise the store's maxKeyBytes.`,
        { route, scope, error },
      );
      return this.#problem(
        'scope-refused',
        'The idempotency store refused the scope this server built for the request (its method, route and tenant); nothing was processed',
      );
    }
    throw error;
  }

  #problem(slug: ProblemSlug, detail: string, retryAfterMs?: number): Admission {
    const answer = problemAnswer(this.options.problemTypeBaseUri, slug, detail, retryAfterMs);
    return { kind: 'answer', answer };
  }
}

/**
 * One claimed request whose handler runs. The adapter captures the handler's response and calls
 * {@link Exchange.finish} once, before anything is sent, so the record is written before the client sees
 * the answer (a retry after the answer finds the key completed or released, never in progress).
 */
export class Exchange {
  #finished = false;

  /** @internal Built by {@link HttpIdempotency.admit}. */
  constructor(
    /** The options of the middleware or plugin that admitted the request. */
    readonly options: ResolvedHttpOptions<never>,
    /** The claim's context (fencing token, attempt, outcome, lease signal), exposed on the request. */
    readonly context: HandlerContext,
    private readonly response: {
      resolve(value: StoredResponse | undefined): void;
      reject(error: unknown): void;
    },
    private readonly result: Promise<RunResult<StoredResponse | undefined>>,
  ) {}

  /**
   * Records how the handler ended: a 5xx answer, or a `failed` response, releases the key
   * (`ServerErrorResponse`, or the error the framework reported, which the runner's `isRetryable` may
   * turn into FAILED); an `uncaptured` answer completes it without a stored response (reported to
   * `onResponseNotStored`, as a body above `maxResponseBytes` is); any other answer completes it with the
   * stored response; a body above `maxResponseBytes` follows `onResponseTooLarge`. A stored form above
   * the runner's `maxResultBytes` follows the runner's `onResultTooLarge`: `'omit'` completes the key
   * without it (the handler's answer is sent; reported to `onResponseNotStored`), `'fail'` records it
   * FAILED and answers 500 `response-too-large` instead (reported too).
   * Resolves once the record is written (or every write attempt failed), with the answer to send instead
   * of the handler's, or `undefined` to send the handler's own. Never rejects.
   */
  async finish(finished: FinishedResponse): Promise<HttpAnswer | undefined> {
    if (this.#finished) return undefined;
    this.#finished = true;
    const o = this.options;
    let replacement: HttpAnswer | undefined;
    if (finished.status >= 500 || finished.failed) {
      this.response.reject(finished.error ?? new ServerErrorResponse(Math.max(finished.status, 500)));
    } else if (finished.uncaptured) {
      this.#notStored(finished);
      this.response.resolve(undefined);
    } else if (finished.body === undefined || finished.bytes > o.maxResponseBytes) {
      this.#notStored(finished);
      if (o.onResponseTooLarge === 'fail') {
        const detail = `The response body passed maxResponseBytes (${o.maxResponseBytes} bytes); it was not sent and cannot be replayed`;
        this.response.reject(new ResultTooLargeError(detail));
        replacement = problemAnswer(o.problemTypeBaseUri, 'response-too-large', detail);
      } else {
        this.response.resolve(undefined);
      }
    } else {
      this.response.resolve(storeResponse(finished.status, finished.headers, finished.body, o.replayHeaders));
      const settled = await this.result.catch(() => undefined);
      if (settled && 'resultOmitted' in settled && settled.resultOmitted) {
        // The runner's `onResultTooLarge: 'omit'` (its default) completed the key without the response
        // (its stored form passed `maxResultBytes`, though the body was within `maxResponseBytes`): the
        // handler's answer goes out, later requests get 409 `response-not-stored` (once recorded), and it
        // is reported.
        this.#notStored(finished);
        return undefined;
      }
      if (
        settled &&
        'status' in settled &&
        settled.status === 'failed' &&
        settled.reason === 'result-too-large'
      ) {
        // The runner's `onResultTooLarge: 'fail'` recorded FAILED (the stored form passed its
        // `maxResultBytes`): answered as `onResponseTooLarge: 'fail'` answers, so the client is not told
        // 201 while every retry is told the operation failed.
        this.#notStored(finished);
        return problemAnswer(
          o.problemTypeBaseUri,
          'response-too-large',
          "The response passed the idempotency store's result limit; it was not sent and cannot be replayed",
        );
      }
      return undefined;
    }
    await this.result.catch(() => undefined);
    return replacement;
  }

  /** Calls `onResponseNotStored`: a completion without a stored response is never silent. */
  #notStored(finished: FinishedResponse): void {
    const { scope, key } = this.context;
    try {
      this.options.onResponseNotStored?.({ scope, key, status: finished.status, bytes: finished.bytes });
    } catch {
      // A listener's bug must not change the answer.
    }
  }
}

/**
 * Whether the store's `InvalidKeyError` for (`scope`, `key`) is about the client's key rather than the
 * scope this server built. Both are well-formed non-empty strings (the key passed
 * {@link parseIdempotencyKey}; the scope is JSON, which escapes a lone surrogate), so the store can only
 * have found one too long. The core's stores take one `maxKeyBytes` for both parts: when the key has more
 * bytes than the scope, the key is too long for the store (the scope may be too); otherwise only the
 * scope can be.
 */
function keyRefused(scope: string, key: string): boolean {
  return Buffer.byteLength(key, 'utf8') > Buffer.byteLength(scope, 'utf8');
}

/** `Promise.withResolvers` (Node 22+) for Node 20. */
interface Deferred<T> {
  readonly promise: Promise<T>;
  resolve(value: T): void;
  reject(error: unknown): void;
}

function deferred<T>(): Deferred<T> {
  let resolve!: (value: T) => void;
  let reject!: (error: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

function joinHeader(value: string | readonly string[] | undefined): string | undefined {
  return typeof value === 'string' || value === undefined ? value : value.join(', ');
}
