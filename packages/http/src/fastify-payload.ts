import { Readable } from 'node:stream';
import type { ReadableStream as WebReadableStream } from 'node:stream/web';
import { errorCodes, type FastifyReply } from 'fastify';

/**
 * A Fastify 5 payload of the web platform as Fastify sends it after onSend: a `Response` (a `fetch`
 * answer) gives the reply its status and headers, and its body; a web `ReadableStream` becomes a Node
 * stream. Anything else is returned as is. Without this the payload was stored as the text
 * `[object Response]` or `[object ReadableStream]` (and the Response's status and headers were lost),
 * which every retry got replayed.
 * @throws Fastify's `FST_ERR_REP_RESPONSE_BODY_CONSUMED` for a `Response` whose body was read already.
 */
export function fromWeb(reply: FastifyReply, payload: unknown): unknown {
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

/** Whether a payload is a Node stream. */
export function isReadable(payload: unknown): payload is Readable {
  return typeof (payload as Readable | null)?.pipe === 'function';
}

/** The bytes of a payload Fastify sends as they are: a serialized body, a string, bytes, or none. */
export function toBuffer(payload: unknown): Buffer {
  if (payload === undefined || payload === null) return Buffer.alloc(0);
  if (Buffer.isBuffer(payload)) return payload;
  if (payload instanceof Uint8Array) return Buffer.from(payload);
  return Buffer.from(String(payload));
}
