import {
  type HandlerContext,
  type Idempotency,
  InvalidKeyError,
  StoreUnavailableError,
} from '@idempotent-consumer/core';
import { AdapterLog } from '@idempotent-consumer/core/kit';
import type { Admission, IncomingRequest } from './admission';
import { ClaimedRequest, type ClaimedRunResult } from './claimed-request';
import { parseIdempotencyKey } from './idempotency-key';
import type { ResolvedHttpOptions } from './options';
import { type ProblemSlug, problemAnswer } from './problem';
import { requestFingerprint } from './request-fingerprint';
import { normalizeRequestTarget } from './request-target';
import { replayAnswer, type StoredResponse } from './stored-response';

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
    let headers: Record<string, string | undefined> | undefined;
    if (o.fingerprintHeaders.length > 0) {
      headers = {};
      for (const name of o.fingerprintHeaders) headers[name] = joinHeader(incoming.headers[name]);
    }
    const target = o.fingerprintTarget ? normalizeRequestTarget(incoming.target) : undefined;
    const body = incoming.loadBody ? await incoming.loadBody() : incoming.body;
    const fingerprint = requestFingerprint(body, headers, target);

    return new Promise<Admission>((resolve, reject) => {
      // Set when the claim is taken: the handler then waits for `claimed.finish`.
      let claimed: ClaimedRequest | undefined;
      const result: Promise<ClaimedRunResult> = this.idempotency.run<StoredResponse | undefined>(
        { scope, key, fingerprint },
        (context: HandlerContext): Promise<StoredResponse | undefined> => {
          claimed = new ClaimedRequest(this.options, context, () => result);
          resolve({ kind: 'run', claimed, exchange: claimed });
          return claimed.handled();
        },
        incoming.signal ? { ...o.runOptions, signal: incoming.signal } : o.runOptions,
      );
      result.then(
        (settled) => {
          if (!claimed) resolve(this.#settled(settled));
        },
        (error: unknown) => {
          if (claimed) return;
          try {
            resolve(this.#storeError(error, scope, key, `${method} ${incoming.route}`));
          } catch (rethrown) {
            reject(rethrown);
          }
        },
      );
    });
  }

  #settled(r: ClaimedRunResult): Admission {
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

function joinHeader(value: string | readonly string[] | undefined): string | undefined {
  return typeof value === 'string' || value === undefined ? value : value.join(', ');
}
