/**
 * `@idempotent-consumer/http`: the `Idempotency-Key` HTTP header (IETF HTTPAPI draft "The Idempotency-Key
 * HTTP Header Field") on the idempotent-consumer state machine. The bindings are on sub-paths: the Express
 * middleware on `./express`, the Fastify plugin on `./fastify`, the Hono middleware on `./hono`, a wrapper
 * for any Web-standard fetch handler (Next.js route handlers, Bun, Deno) on `./fetch`, and the NestJS
 * interceptor on `./nest`. This entry holds what they share: one implementation of the draft's rules over
 * a framework-neutral request and response.
 * @packageDocumentation
 */
export type { Admission, FinishedResponse, IncomingHeaders, IncomingRequest } from './admission';
export { ClaimedRequest, type ClaimedRunResult, Exchange } from './claimed-request';
export { HttpIdempotency, httpScope } from './http-idempotency';
export {
  IDEMPOTENCY_KEY_HEADER,
  type InvalidKeyReason,
  type ParsedIdempotencyKey,
  parseIdempotencyKey,
} from './idempotency-key';
export {
  type HttpIdempotencyOptions,
  type ResolvedHttpOptions,
  type ResponseTooLargePolicy,
  resolveHttpOptions,
} from './options';
export {
  type HttpAnswer,
  PROBLEM_CONTENT_TYPE,
  PROBLEMS,
  type ProblemDetails,
  type ProblemSlug,
  problemAnswer,
  retryAfterSeconds,
} from './problem';
export { type RequestBody, requestFingerprint } from './request-fingerprint';
export { normalizeRequestTarget } from './request-target';
export { ServerErrorResponse } from './server-error-response';
export {
  DEFAULT_REPLAY_HEADERS,
  type OutgoingHeaders,
  replayAnswer,
  type StoredResponse,
  storeResponse,
} from './stored-response';
