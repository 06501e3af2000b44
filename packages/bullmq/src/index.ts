/**
 * `@idempotent-consumer/bullmq` makes BullMQ workers effectively-once, with a processor that claims each
 * job's key in the idempotency store of `@idempotent-consumer/core`. The BullMQ column of
 * docs/design.md#outcome-to-broker-action says what it does with each outcome.
 * @packageDocumentation
 */
export { type DeadLetterFields, readDeadLetter } from './dead-letter';
export type { Decision, LeaveReason, Rethrown } from './decide';
export type { BullMqIdempotencyDependencies } from './dependencies';
export type { BullMqEventEmitter, BullMqIdempotencyEvents, BullMqSource, MessageSubject } from './events';
export type { BullMqHandler, BullMqHandlerContext } from './handler';
export {
  type BullMqIdempotencyOptions,
  defaultIdempotencyKey,
  type IdempotencyKeyExtractor,
} from './options';
export { type IdempotentProcessor, idempotentProcessor, type WorkerLike } from './processor';
