import type { FastifyRequest } from 'fastify';
import type { ClaimedRequest } from './claimed-request';
import type { HttpIdempotency } from './http-idempotency';
import type { OutgoingHeaders } from './stored-response';

/** A claimed request while its handler runs and its answer is stored. */
export interface InFlight {
  readonly claimed: ClaimedRequest;
  /**
   * The reply's headers when the request was claimed, right before the handler (set by hooks: CORS...):
   * kept on an answer that replaces the handler's.
   */
  readonly headersBefore: OutgoingHeaders;
  /** Aborts when the client went away before the response was sent. */
  readonly gone: AbortSignal;
  error?: unknown;
  /** Set when `reply.send` was called (by the handler, or by Fastify for it). */
  sent?: boolean;
  /** Set when a second answer was dropped while the first was stored (see `sendOnce`). */
  dropped?: boolean;
}

/** What the Fastify plugin's hooks share, per registration. */
export interface FastifyPluginState {
  readonly http: HttpIdempotency<FastifyRequest>;
  /** Claimed requests whose answer is not stored yet. */
  readonly inFlight: WeakMap<FastifyRequest, InFlight>;
  /** Claimed requests whose handler's answer reached onSend, where it waits for the store. */
  readonly answering: WeakSet<FastifyRequest>;
  /** Answers given before the handler that have no `Content-Type`, by request (see `untypedReplay`). */
  readonly untyped: WeakMap<FastifyRequest, Buffer>;
}
