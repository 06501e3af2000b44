import type { FastifyReply, FastifyRequest } from 'fastify';
import type { FinishedResponse } from './admission';
import { finishReply, setAnswer } from './fastify-answer';
import { fromWeb, isReadable, toBuffer } from './fastify-payload';
import type { FastifyPluginState, InFlight } from './fastify-state';
import { type BufferedStream, bufferStream } from './stream-buffer';

/**
 * The plugin's `onSend` hook: stores a claimed request's answer before it is sent (see the plugin's
 * description), and gives an untyped replay back its missing `Content-Type`. Resolves with the payload
 * to send.
 */
export async function storeOnSend(
  plugin: FastifyPluginState,
  request: FastifyRequest,
  reply: FastifyReply,
  sent: unknown,
): Promise<unknown> {
  untypedReplay(plugin, request, reply, sent);
  const state = plugin.inFlight.get(request);
  if (!state) return sent;
  plugin.inFlight.delete(request);
  let payload: unknown;
  try {
    payload = fromWeb(reply, sent);
  } catch (error) {
    // A Response whose body was read already: Fastify answers the error, which finishes the request.
    plugin.inFlight.set(request, state);
    throw error;
  }
  if (state.error === undefined) plugin.answering.add(request);
  const base = { status: reply.statusCode, headers: reply.getHeaders(), error: state.error };
  if (isReadable(payload)) return storeStream(plugin, request, reply, state, base, payload);
  const body = toBuffer(payload);
  return finishReply(reply, state, { ...base, body, bytes: body.length }, payload);
}

/** The handler's status, headers and error, as onSend found them. */
type Head = Pick<FinishedResponse, 'status' | 'headers' | 'error'>;

/** Stores a stream payload: buffered up to `maxResponseBytes`, then as `onResponseTooLarge` says. */
async function storeStream(
  plugin: FastifyPluginState,
  request: FastifyRequest,
  reply: FastifyReply,
  state: InFlight,
  base: Head,
  payload: NodeJS.ReadableStream & { pipe: unknown },
): Promise<unknown> {
  const { maxResponseBytes, onResponseTooLarge } = plugin.http.options;
  let buffered: BufferedStream;
  try {
    buffered = await bufferStream(payload as never, maxResponseBytes, state.gone);
  } catch (error) {
    if (state.gone.aborted) {
      // The client went away while the body was buffered: the stream was destroyed (Fastify destroys
      // a payload stream whose response closed), so the body never ends and nothing can be sent or
      // stored. The handler returned, so its side effects are done: the key completes without a
      // stored response (a 5xx releases it), as when the client leaves a pass-through body. Without
      // this the stream would be read, and the claim held, for as long as the process lives.
      await state.claimed.finish({ ...base, body: undefined, bytes: 0, uncaptured: true });
      return Buffer.alloc(0);
    }
    // The stream failed: Fastify answers the error (onError, the error handler, then onSend again),
    // and that answer finishes the request (a 5xx releases the key). Without it the claim would be
    // held, and heartbeated, for as long as the process lives.
    plugin.inFlight.set(request, state);
    throw error;
  }
  if (buffered.complete) {
    const finished = { ...base, body: buffered.body, bytes: buffered.body.length };
    return finishReply(reply, state, finished, buffered.body);
  }
  const finished: FinishedResponse = { ...base, body: undefined, bytes: buffered.bytes };
  if (base.status >= 500) {
    await state.claimed.finish(finished); // released; the error body streams on
    setAnswer(reply, finished);
    return buffered.whole();
  }
  if (onResponseTooLarge === 'pass-through') {
    // Sent as it streams; the key completes (without a stored response) once the response is done. A
    // body stream that failed on the way is the handler failing after its response went out: the key
    // is released, or FAILED when the error is not retryable (as on Express).
    reply.raw.once('close', () => {
      const failure = buffered.failure();
      void state.claimed.finish(failure ? { ...finished, failed: true, error: failure.error } : finished);
    });
    setAnswer(reply, finished);
    return buffered.whole();
  }
  buffered.discard();
  return finishReply(reply, state, finished, Buffer.alloc(0));
}

/**
 * A stored response without a `Content-Type` (the handler sent a stream, or a `Response`, without one:
 * Fastify sends a stream as it is, and the stored copy went out as a Buffer, again without one) is
 * replayed without one too. `reply.send` gives a Buffer `application/octet-stream` when it has no
 * `Content-Type`, before the onSend hooks run; this takes it off again when the payload is still that
 * answer's body (not an error answer sent instead), so the replay has the headers of the first answer.
 * onSend hooks that run before this plugin's see the added type.
 */
function untypedReplay(
  plugin: FastifyPluginState,
  request: FastifyRequest,
  reply: FastifyReply,
  sent: unknown,
): void {
  const body = plugin.untyped.get(request);
  if (body === undefined) return;
  plugin.untyped.delete(request);
  if (sent === body) reply.removeHeader('content-type');
}

/** The plugin's `onError` hook: Fastify answers the error next, and that answer is the one stored. */
export function recordFastifyError(
  plugin: FastifyPluginState,
  request: FastifyRequest,
  error: unknown,
): void {
  plugin.answering.delete(request);
  const state = plugin.inFlight.get(request);
  if (state) state.error = error;
}
