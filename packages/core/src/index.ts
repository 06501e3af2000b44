/**
 * `@idempotent-consumer/core`, the idempotency state machine with its stores and its runner. docs/design.md
 * explains it. @packageDocumentation
 */
export { type BackoffOptions, computeBackoffMs } from './backoff';
export type { DeadLetterReason } from './dead-letter';
export * from './errors';
export { checkFingerprint, fingerprint, type JsonValue, type Payload } from './fingerprint';
export {
  buildRecordKey,
  buildScopeScanPattern,
  DEFAULT_KEY_PREFIX,
  DEFAULT_MAX_KEY_BYTES,
  parseRecordKey,
  type RecordId,
} from './keys';
export type { RunOverrides } from './kit/run-overrides';
export type {
  MeterProviderLike,
  TelemetryOptions,
  TracerProviderLike,
} from './kit/telemetry/telemetry-options';
export {
  getIdempotencyContext,
  type IdempotentFunction,
  type MakeIdempotentOptions,
  makeIdempotent,
} from './make-idempotent';
export type { EventSubject, IdempotencyEvents } from './runner/events';
export type { HandlerContext } from './runner/handler-context';
export {
  describeError,
  type ExecuteOptions,
  type Handler,
  Idempotency,
  type RunOptions,
  type RunRequest,
} from './runner/idempotency';
export type { LeaseRenewal } from './runner/lease-renewal';
export { consoleLogger, type IdempotencyLogger } from './runner/logger';
export {
  defaultIsRetryable,
  type IdempotencyOptions,
  type ResolvedIdempotencyOptions,
} from './runner/options';
export type * from './runner/run-result';
export type * from './store/idempotency-store';
export { MemoryIdempotencyStore, type MemoryIdempotencyStoreOptions } from './store/memory-store';
export {
  type AdminPurgeReply,
  type AdminReleaseReply,
  RedisIdempotencyAdmin,
  type RedisIdempotencyAdminOptions,
} from './store/redis-admin';
export type { RedisClient } from './store/redis-client';
export { RedisIdempotencyStore, type RedisIdempotencyStoreOptions } from './store/redis-store';
export type { WaitForReplicasOptions } from './store/replica-wait';
