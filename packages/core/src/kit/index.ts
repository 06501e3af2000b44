/**
 * `@idempotent-consumer/core/kit`: what a broker port is built from (docs/design.md#pipeline-and-ports).
 * A user's code imports `@idempotent-consumer/core`; tools that read records import
 * `@idempotent-consumer/core/tools`.
 *
 * - the pipeline and the port contract: {@link MessagePipeline}, {@link MessagePort} and the shapes it
 *   hands a port, {@link decide} and {@link PipelineDecision};
 * - the consumer around it: {@link StoreGate} (fail closed, and the store checks), {@link AdapterLog},
 *   {@link StopSignal} (a `stop()` bounded by `stopTimeoutMs`), {@link LeaseKeeperSet} (a batch's claims
 *   kept alive), {@link TypedEventEmitter}, {@link MessageTelemetry}, and {@link check} for options;
 * - the shared vocabulary of events and dead letters: {@link MessageSubjectOf}, {@link LeaseLostFields},
 *   {@link DEAD_LETTER_FIELDS}, {@link NO_CLAIM_OUTCOME}, {@link DeadLetterDecision}.
 *
 * @packageDocumentation
 */
export { DEAD_LETTER_FIELDS, type DeadLetterDecision, NO_CLAIM_OUTCOME } from '../dead-letter';
export { type Decision as PipelineDecision, decide } from '../pipeline/decide';
export { type BatchClaim, MessagePipeline, type PipelineParts } from '../pipeline/message-pipeline';
export type {
  CarriedOut,
  MessageEnd,
  MessagePort,
  Prepared,
  SubjectFields,
  WarningWords,
} from '../pipeline/port';
export { AdapterLog } from './adapter-log';
export { check } from './check';
export { LeaseKeeperSet } from './lease-keeper-set';
export type { LeaseLostFields } from './lease-lost-during';
export type { MessageSubjectOf } from './message-subject';
export { StopSignal } from './stop-signal';
export { StoreGate } from './store-gate';
export { type MessageSpan, MessageTelemetry } from './telemetry';
export { TypedEventEmitter } from './typed-emitter';
