import { errorCodes, type FastifyReply, type FastifyRequest } from 'fastify';
import type { FastifyPluginState, InFlight } from './fastify-state';

/**
 * Fastify drops an answer sent after the response ended (it logs `FST_ERR_REP_ALREADY_SENT`), but while
 * onSend stores the first answer nothing has been sent yet: a second `reply.send`, or a value returned
 * after `reply.send` in an async handler, would go out instead of the first, which is the one stored
 * and replayed. That second answer is dropped and logged as Fastify does once the response ended.
 * Fastify's own error answer after a failed onSend goes through (the onError hook ends the guard). An
 * error sent meanwhile (an async handler that rejects after `reply.send`) is logged as Fastify logs it
 * once the response ended, at `error`: dropped as a second answer, it was lost.
 */
export function sendOnce(
  plugin: FastifyPluginState,
  request: FastifyRequest,
  reply: FastifyReply,
  state: InFlight,
): void {
  const send = reply.send;
  reply.send = function sendUnlessAnswering(this: FastifyReply, payload?: unknown) {
    state.sent = true;
    if (!plugin.answering.has(request)) return send.call(this, payload);
    state.dropped = true;
    if (payload instanceof Error)
      this.log.error({ err: payload }, 'Promise errored, but reply.sent = true was set');
    else this.log.warn({ err: new errorCodes.FST_ERR_REP_ALREADY_SENT(request.url, request.method) });
    return this;
  };
}

/**
 * `reply.hijack()` skips onSend: the handler answers on `reply.raw` itself, so nothing is captured or
 * stored, and without this the claim would be held, and heartbeated, for as long as the process lives.
 * The claimed request finishes when the raw response closes after it was sent: below 500 the key
 * completes without a stored response (the handler ran; releasing would let a retry run it again), a 5xx
 * releases it. A close before the handler ended its response is the client gone while the handler may
 * still run, and still fail: nothing is recorded then, as on Express for a response that never ends. Node
 * emits no `finish` for an end on the destroyed response, so the key stays in progress until the runner's
 * `handlerTimeoutMs` releases it as abandoned (or the process ends and the lease lapses).
 */
export function finishOnHijack(
  plugin: FastifyPluginState,
  request: FastifyRequest,
  reply: FastifyReply,
  state: InFlight,
): void {
  const hijack = reply.hijack;
  reply.hijack = function hijackAndFinishOnClose(this: FastifyReply) {
    const raw = reply.raw;
    const done = () => {
      if (plugin.inFlight.get(request) !== state) return; // onSend ran after all
      if (!raw.writableFinished) return; // the client is gone; the handler may still run (see above)
      plugin.inFlight.delete(request);
      void state.claimed.finish({
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
 * An async handler resolved with `payload`. Fastify sends an `undefined` one itself (the empty answer
 * under the status and headers the handler set, such as a 204), but not once the client went away
 * (`wrap-thenable`: an aborted request, a destroyed socket): nothing then reaches onSend, and without
 * this the claim would be held, and heartbeated, for as long as the process lives, though the handler
 * ran. Once Fastify's own reaction to the handler's promise has run, a claimed request for which
 * `reply.send` was never called (nor hijacked) is finished with the answer Fastify would have sent: that
 * status and those headers, an empty body (stored and replayed; a 5xx releases the key). Routes
 * registered before the plugin are not seen (their handlers are not wrapped).
 */
export function handlerReturned(
  plugin: FastifyPluginState,
  request: FastifyRequest,
  reply: FastifyReply,
  payload: unknown,
): void {
  const state = plugin.inFlight.get(request);
  if (!state || state.sent || payload !== undefined) return;
  setImmediate(() => {
    if (state.sent || reply.sent || plugin.inFlight.get(request) !== state) return;
    plugin.inFlight.delete(request);
    const { statusCode: status } = reply;
    void state.claimed.finish({ status, headers: reply.getHeaders(), body: Buffer.alloc(0), bytes: 0 });
  });
}
