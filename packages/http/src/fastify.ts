/**
 * `@idempotent-consumer/http/fastify`: the `Idempotency-Key` plugin for Fastify 5.
 * @packageDocumentation
 */
import { Readable } from 'node:stream';
import type { ReadableStream as WebReadableStream } from 'node:stream/web';
import { type HandlerContext, type Idempotency, InvalidOptionError } from '@idempotent-consumer/core';
import { errorCodes, type FastifyPluginAsync, type FastifyReply, type FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { headersBefore, withHeadersBefore } from './answer';
import { type Exchange, type FinishedResponse, HttpIdempotency } from './exchange';
import { ClaimPlacement } from './fastify-claim-placement';
import { type HttpIdempotencyOptions, resolveHttpOptions } from './options';
import type { HttpAnswer } from './problem';
import type { OutgoingHeaders } from './stored-response';
import { type BufferedStream, bufferStream } from './stream-buffer';

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

interface InFlight {
  readonly exchange: Exchange;
  /**
   * The reply's headers when the request was claimed, right before the handler (set by hooks: CORS...):
   * kept on an answer that replaces the handler's.
   */
  readonly headersBefore: OutgoingHeaders;
  /** Aborts when the response closes: the client went away, or the response was sent. */
  readonly gone: AbortSignal;
  error?: unknown;
  /** Set when `reply.send` was called (by the handler, or by Fastify for it). */
  sent?: boolean;
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
  const http = new HttpIdempotency<FastifyRequest>(idempotency, resolveHttpOptions(httpOptions));
  const inFlight = new WeakMap<FastifyRequest, InFlight>();
  /** Claimed requests whose handler's answer reached onSend, where it waits for the store. */
  const answering = new WeakSet<FastifyRequest>();
  /** Answers given before the handler that have no `Content-Type`, by request: see {@link untypedReplay}. */
  const untyped = new WeakMap<FastifyRequest, Buffer>();
  if (!fastify.hasRequestDecorator('idempotency')) fastify.decorateRequest('idempotency', undefined);

  const placement = new ClaimPlacement();
  fastify.addHook('onRoute', (routeOptions) => placement.place(routeOptions, claim, handlerReturned));
  // A route registered before the plugin is not seen by onRoute: the instance hook claims for it.
  const warnedRoutes = new Set<string>();
  fastify.addHook('preHandler', async (request, reply) => {
    if (!placement.placed(request)) return claim(request, reply, warnedRoutes);
  });

  /**
   * Claims a covered request (see the plugin's description). `early`: the route was registered before the
   * plugin, so this runs before the route's own `preHandler` hooks; the first claim of such a route says so
   * once through the runner's logger.
   */
  async function claim(request: FastifyRequest, reply: FastifyReply, early?: Set<string>): Promise<unknown> {
    const config = request.routeOptions.config?.idempotency;
    const route = request.routeOptions.url;
    if (config === false || route === undefined) return;
    const gone = new AbortController();
    reply.raw.once('close', () => gone.abort());
    const admission = await http.admit({
      request,
      signal: gone.signal,
      method: request.method,
      route,
      target: request.url,
      headers: request.headers,
      body: request.body,
      routeConfig: config,
    });
    if (admission.kind === 'pass') return;
    if (early && idempotency.logger && !early.has(`${request.method} ${route}`)) {
      early.add(`${request.method} ${route}`);
      idempotency.logger.warn(
        `idempotent-consumer: ${request.method} ${route} was registered before the idempotency plugin, so its key is claimed before the route's own preHandler hooks (an authentication hook's 401 would be stored and replayed). Register the plugin with await before the routes.`,
        { route },
      );
    }
    if (admission.kind === 'answer') {
      if (admission.answer.headers['content-type'] === undefined) untyped.set(request, admission.answer.body);
      return send(reply, admission.answer);
    }
    const state: InFlight = {
      exchange: admission.exchange,
      headersBefore: headersBefore(reply.getHeaders()),
      gone: gone.signal,
    };
    inFlight.set(request, state);
    request.idempotency = admission.exchange.context;
    finishOnHijack(request, reply, state);
    sendOnce(request, reply, state);
  }

  /**
   * An async handler resolved with `payload`. Fastify sends an `undefined` one itself (the empty answer
   * under the status and headers the handler set, such as a 204), but not once the client went away
   * (`wrap-thenable`: an aborted request, a destroyed socket): nothing then reaches onSend, and without
   * this the claim would be held, and heartbeated, for as long as the process lives, though the handler
   * ran. Once Fastify's own reaction to the handler's promise has run, a claimed request for which
   * `reply.send` was never called (nor hijacked) is finished with the answer Fastify would have sent: that
   * status and those headers, an empty body (stored and replayed; a 5xx releases the key). Routes
   * registered before the plugin are not seen (their handlers are not wrapped).
   */
  function handlerReturned(request: FastifyRequest, reply: FastifyReply, payload: unknown): void {
    const state = inFlight.get(request);
    if (!state || state.sent || payload !== undefined) return;
    setImmediate(() => {
      if (state.sent || reply.sent || inFlight.get(request) !== state) return;
      inFlight.delete(request);
      const { statusCode: status } = reply;
      void state.exchange.finish({ status, headers: reply.getHeaders(), body: Buffer.alloc(0), bytes: 0 });
    });
  }

  /**
   * Fastify drops an answer sent after the response ended (it logs `FST_ERR_REP_ALREADY_SENT`), but while
   * onSend stores the first answer nothing has been sent yet: a second `reply.send`, or a value returned
   * after `reply.send` in an async handler, would go out instead of the first, which is the one stored
   * and replayed. That second answer is dropped and logged as Fastify does once the response ended.
   * Fastify's own error answer after a failed onSend goes through (the onError hook ends the guard). An
   * error sent meanwhile (an async handler that rejects after `reply.send`) is logged as Fastify logs it
   * once the response ended, at `error`: dropped as a second answer, it was lost.
   */
  function sendOnce(request: FastifyRequest, reply: FastifyReply, state: InFlight): void {
    const send = reply.send;
    reply.send = function sendUnlessAnswering(this: FastifyReply, payload?: unknown) {
      state.sent = true;
      if (!answering.has(request)) return send.call(this, payload);
      if (payload instanceof Error)
        this.log.error({ err: payload }, 'Promise errored, but reply.sent = true was set');
      else this.log.warn({ err: new errorCodes.FST_ERR_REP_ALREADY_SENT(request.url, request.method) });
      return this;
    };
  }

  /**
   * `reply.hijack()` skips onSend: the handler answers on `reply.raw` itself, so nothing is captured or
   * stored, and without this the claim would be held, and heartbeated, for as long as the process lives.
   * The exchange finishes when the raw response closes after it was sent: below 500 the key completes
   * without a stored response (the handler ran; releasing would let a retry run it again), a 5xx releases
   * it. A close before the handler ended its response is the client gone while the handler may still run,
   * and still fail: nothing is recorded then, as on Express for a response that never ends. Node emits no
   * `finish` for an end on the destroyed response, so the key stays in progress until the runner's
   * `handlerTimeoutMs` releases it as abandoned (or the process ends and the lease lapses).
   */
  function finishOnHijack(request: FastifyRequest, reply: FastifyReply, state: InFlight): void {
    const hijack = reply.hijack;
    reply.hijack = function hijackAndFinishOnClose(this: FastifyReply) {
      const raw = reply.raw;
      const done = () => {
        if (inFlight.get(request) !== state) return; // onSend ran after all
        if (!raw.writableFinished) return; // the client is gone; the handler may still run (see above)
        inFlight.delete(request);
        void state.exchange.finish({
          status: raw.statusCode,
          headers: raw.getHeaders(),
          body: undefined,
          bytes: 0,
          error: state.error,
          uncaptured: true,
        });
      };
      if (raw.closed) queueMicrotask(done);
      else raw.once('close', done);
      return hijack.call(this);
    };
  }

  /**
   * A stored response without a `Content-Type` (the handler sent a stream, or a `Response`, without one:
   * Fastify sends a stream as it is, and the stored copy went out as a Buffer, again without one) is
   * replayed without one too. `reply.send` gives a Buffer `application/octet-stream` when it has no
   * `Content-Type`, before the onSend hooks run; this takes it off again when the payload is still that
   * answer's body (not an error answer sent instead), so the replay has the headers of the first answer.
   * onSend hooks that run before this plugin's see the added type.
   */
  function untypedReplay(request: FastifyRequest, reply: FastifyReply, sent: unknown): void {
    const body = untyped.get(request);
    if (body === undefined) return;
    untyped.delete(request);
    if (sent === body) reply.removeHeader('content-type');
  }

  fastify.addHook('onError', async (request, _reply, error) => {
    answering.delete(request); // Fastify answers the error next
    const state = inFlight.get(request);
    if (state) state.error = error;
  });

  fastify.addHook('onSend', async (request, reply, sent: unknown) => {
    untypedReplay(request, reply, sent);
    const state = inFlight.get(request);
    if (!state) return sent;
    inFlight.delete(request);
    let payload: unknown;
    try {
      payload = fromWeb(reply, sent);
    } catch (error) {
      // A Response whose body was read already: Fastify answers the error, which finishes the exchange.
      inFlight.set(request, state);
      throw error;
    }
    if (state.error === undefined) answering.add(request);
    const status = reply.statusCode;
    const base = { status, headers: reply.getHeaders(), error: state.error };
    if (isReadable(payload)) {
      let buffered: BufferedStream;
      try {
        buffered = await bufferStream(payload, http.options.maxResponseBytes, state.gone);
      } catch (error) {
        if (state.gone.aborted) {
          // The client went away while the body was buffered: the stream was destroyed (Fastify destroys
          // a payload stream whose response closed), so the body never ends and nothing can be sent or
          // stored. The handler returned, so its side effects are done: the key completes without a
          // stored response (a 5xx releases it), as when the client leaves a pass-through body. Without
          // this the stream would be read, and the claim held, for as long as the process lives.
          await state.exchange.finish({ ...base, body: undefined, bytes: 0, uncaptured: true });
          return Buffer.alloc(0);
        }
        // The stream failed: Fastify answers the error (onError, the error handler, then onSend again),
        // and that answer finishes the exchange (a 5xx releases the key). Without it the claim would be
        // held, and heartbeated, for as long as the process lives.
        inFlight.set(request, state);
        throw error;
      }
      if (buffered.complete)
        return finish(
          reply,
          state,
          { ...base, body: buffered.body, bytes: buffered.body.length },
          buffered.body,
        );
      const finished: FinishedResponse = { ...base, body: undefined, bytes: buffered.bytes };
      if (status >= 500) {
        await state.exchange.finish(finished); // released; the error body streams on
        setAnswer(reply, finished);
        return buffered.whole();
      }
      if (http.options.onResponseTooLarge === 'pass-through') {
        // Sent as it streams; the key completes (without a stored response) once the response is done. A
        // body stream that failed on the way is the handler failing after its response went out: the key
        // is released, or FAILED when the error is not retryable (as on Express).
        reply.raw.once('close', () => {
          const failure = buffered.failure();
          void state.exchange.finish(
            failure ? { ...finished, failed: true, error: failure.error } : finished,
          );
        });
        setAnswer(reply, finished);
        return buffered.whole();
      }
      buffered.discard();
      return finish(reply, state, finished, Buffer.alloc(0));
    }
    const body = toBuffer(payload);
    return finish(reply, state, { ...base, body, bytes: body.length }, payload);
  });
};

/**
 * The Fastify plugin; register it with `app.register(fastifyIdempotency, { idempotency, ...options })`.
 * See the description of the plugin function above for what it does.
 */
export const fastifyIdempotency = fp(plugin, { name: '@idempotent-consumer/http', fastify: '5.x' });

/**
 * Finishes the exchange with the handler's response and gives the reply what is sent: the handler's
 * `payload` under the status and headers it had, or the exchange's answer instead (500
 * `response-too-large`) under the headers the reply had when it was claimed and the answer's own, never
 * the handler's.
 */
async function finish(
  reply: FastifyReply,
  state: InFlight,
  finished: FinishedResponse,
  payload: unknown,
): Promise<unknown> {
  const answer = await state.exchange.finish(finished);
  setAnswer(reply, answer ? withHeadersBefore(state.headersBefore, answer) : finished);
  return answer ? answer.body : payload;
}

/**
 * Gives the reply the status and only the headers of `answer`: the stored answer replacing the handler's,
 * or the handler's as they were when it reached onSend (what the exchange stored), which a second answer
 * dropped meanwhile (`reply.code(400).send(...)`) may have changed.
 */
function setAnswer(reply: FastifyReply, answer: { status: number; headers: OutgoingHeaders }): void {
  for (const name of Object.keys(reply.getHeaders())) reply.removeHeader(name);
  setAnswerHeaders(reply.code(answer.status), answer);
}

function send(reply: FastifyReply, answer: HttpAnswer): FastifyReply {
  return setAnswerHeaders(reply.code(answer.status), answer).send(answer.body);
}

/** Sets an answer's headers on the reply; a multi-valued one (`Set-Cookie`) goes out as several lines. */
function setAnswerHeaders(reply: FastifyReply, answer: { headers: OutgoingHeaders }): FastifyReply {
  for (const [name, value] of Object.entries(answer.headers))
    if (value !== undefined) reply.header(name, typeof value === 'object' ? [...value] : value);
  return reply;
}

/**
 * A Fastify 5 payload of the web platform as Fastify sends it after onSend: a `Response` (a `fetch`
 * answer) gives the reply its status and headers, and its body; a web `ReadableStream` becomes a Node
 * stream. Anything else is returned as is. Without this the payload was stored as the text
 * `[object Response]` or `[object ReadableStream]` (and the Response's status and headers were lost),
 * which every retry got replayed.
 * @throws Fastify's `FST_ERR_REP_RESPONSE_BODY_CONSUMED` for a `Response` whose body was read already.
 */
function fromWeb(reply: FastifyReply, payload: unknown): unknown {
  if (payload === null || typeof payload !== 'object') return payload;
  if (Object.prototype.toString.call(payload) === '[object Response]') {
    const response = payload as Response;
    if (response.body !== null && response.bodyUsed)
      throw new errorCodes.FST_ERR_REP_RESPONSE_BODY_CONSUMED();
    reply.code(response.status);
    for (const [name, value] of response.headers) reply.header(name, value);
    return response.body === null ? undefined : Readable.fromWeb(response.body as WebReadableStream);
  }
  if (typeof (payload as ReadableStream).getReader === 'function' && !isReadable(payload)) {
    return Readable.fromWeb(payload as WebReadableStream);
  }
  return payload;
}

function isReadable(payload: unknown): payload is Readable {
  return typeof (payload as Readable | null)?.pipe === 'function';
}

function toBuffer(payload: unknown): Buffer {
  if (payload === undefined || payload === null) return Buffer.alloc(0);
  if (Buffer.isBuffer(payload)) return payload;
  if (payload instanceof Uint8Array) return Buffer.from(payload);
  return Buffer.from(String(payload));
}
