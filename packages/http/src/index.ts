/**
 * `@idempotent-consumer/http`: the `Idempotency-Key` HTTP header (IETF HTTPAPI draft "The Idempotency-Key
 * HTTP Header Field") on the idempotent-consumer state machine. The Express middleware is on the
 * `./express` sub-path, the Fastify plugin on `./fastify`; this entry holds what both share.
 * @packageDocumentation
 */
export {
  type Admission,
  Exchange,
  type FinishedResponse,
  HttpIdempotency,
  httpScope,
  type IncomingRequest,
} from './exchange';
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
