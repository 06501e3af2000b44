/**
 * `@idempotent-consumer/core/kit`: the pieces every broker adapter needs, for adapter authors (a user's
 * code imports `@idempotent-consumer/core`). The RabbitMQ, Kafka and SQS adapters are built on them, so
 * the same concept has one behaviour and one name in each:
 *
 * - {@link TypedEventEmitter}: events whose listeners cannot change a decision;
 * - {@link StoreGate}: fail closed while the store does not answer, one probe loop per consumer;
 * - {@link LeaseKeeperSet}: the leases of a batch's claims kept alive until each message runs;
 * - {@link giveBackUnrun}: a claim whose handler never started given back, again once the store answers;
 * - {@link recordCompletionLate}: a completion the runner could not record written, again once the store answers;
 * - {@link unreadableDuplicateOf}: a DUPLICATE whose stored result cannot be decoded, settled as a DUPLICATE;
 * - {@link heartbeatIntervalFor}: how often a lease is extended;
 * - {@link RunOverrides}: the runner options a consumer may override, and their check;
 * - {@link MessageSubjectOf}: the subject of every per-message event (`MessageSubject` in each adapter);
 * - {@link leaseLostDuring}: where a `lease-lost` run lost its claim, the `during` of every adapter's `leaseLost`;
 * - {@link sleep}: a wait that ends early, without rejecting, when the consumer stops;
 * - {@link sharedAbortController}: the consumer's stop signal, which many concurrent waits listen to;
 * - {@link unlessAborted}: a wait for a call the other side may never answer, ended by the stop signal;
 * - {@link within} and {@link checkStopTimeoutMs}: a `stop()` bounded by `stopTimeoutMs`, the same option
 *   (default, range, least time for the last requests) in every adapter that has one;
 * - {@link MessageTelemetry}: OpenTelemetry spans and metrics per message, through the optional
 *   `@opentelemetry/api` (one `telemetry` option, {@link TelemetryOptions}, in every adapter);
 * - {@link AdapterLog}: the consumer's warnings (never a line per message), and the runner's through it;
 * - {@link checkStoreAnswers} and {@link watchRedisErrors}: one ping at start, one log line per Redis outage;
 * - {@link runUnprotected}: a run without a claim, whose `signal` aborts when the consumer stops;
 * - {@link UnprotectedRuns}: the bound on runs without a claim when the broker cannot settle them;
 * - {@link extendHandlerContext}: the runner's handler context with the adapter's fields, `signal` still lazy;
 * - {@link redactUrl}: a Redis (or other service) URL for a message, its password hidden;
 * - the option checks (`checkPositiveInteger`, …), each throwing `InvalidOptionError` with the option's name;
 * - the dead-letter vocabulary ({@link DEAD_LETTER_FIELDS}, {@link deadLetterReasonOf}, {@link unprotectedDeadLetter}, {@link NO_CLAIM_OUTCOME}),
 *   the stored result's codec ({@link encodeResult}, {@link decodeResult}), {@link SCRIPT_NUMBER_OF_KEYS} and
 *   {@link WriteCoalescer} (how `RedisIdempotencyStore` shares socket writes), for adapter, store and tool
 *   authors (the CLI reads records with them; the bench's bare reference coalesces its writes with it).
 *
 * @packageDocumentation
 */
export {
  DEAD_LETTER_FIELDS,
  type DeadLetterDecision,
  deadLetterOf,
  deadLetterReasonOf,
  NO_CLAIM_OUTCOME,
  unprotectedDeadLetter,
} from '../dead-letter';
export {
  type AckReason,
  type Decision as PipelineDecision,
  type DecisionPolicy as PipelineDecisionPolicy,
  decide,
  type LeaveReason,
  type RetryReason,
} from '../pipeline/decide';
export {
  type BatchClaim,
  MessagePipeline,
  type PipelineOptions,
  type PipelineParts,
} from '../pipeline/message-pipeline';
export type {
  CarriedOut,
  MessageEnd,
  MessagePort,
  PipelineEventName,
  Prepared,
  SubjectFields,
  WarningWords,
} from '../pipeline/port';
export type { SignalSource } from '../runner/handler-context';
export { decodeResult, type EncodedResult, encodeResult, type ResultOptions } from '../runner/result-codec';
export { SCRIPT_NUMBER_OF_KEYS } from '../store/scripts';
export {
  type CorkableStream,
  DEFAULT_MAX_COMMANDS_PER_WRITE,
  WriteCoalescer,
} from '../store/write-coalescer';
export { AdapterLog } from './adapter-log';
export { type GiveBackOptions, giveBackUnrun, writtenClaimOf } from './give-back';
export { extendHandlerContext } from './handler-context';
export { heartbeatIntervalFor } from './heartbeat';
export {
  LeaseKeeperSet,
  type LeaseKeeperSetCallbacks,
  type LeaseKeeperSetGiveBack,
  type LeaseKeeperSetTimings,
  type TakenClaim,
} from './lease-keeper-set';
export {
  type AdapterLeaseLostDuring,
  type LeaseLostFields,
  type LeaseLostReason,
  leaseLostDuring,
} from './lease-lost-during';
export type { MessageSubjectOf } from './message-subject';
export {
  checkAtMost,
  checkBackoffOptions,
  checkFiniteNonNegative,
  checkFunction,
  checkNonEmptyString,
  checkNonNegativeInteger,
  checkOneOf,
  checkPositiveInteger,
} from './option-checks';
export { type RecordCompletionLateOptions, recordCompletionLate } from './record-completion-late';
export { redactUrl } from './redact-url';
export { checkRunOverrides, pickRunOverrides, type RunOverrides } from './run-overrides';
export { sharedAbortController } from './shared-abort';
export { sleep } from './sleep';
export { checkStopTimeoutMs, DEFAULT_STOP_TIMEOUT_MS, STOP_FINAL_STEP_MIN_MS } from './stop-timeout';
export { checkStoreAnswers, checkStoreAtStart, describeStoreLocation, watchRedisErrors } from './store-check';
export {
  DEFAULT_STORE_PROBE_BACKOFF,
  StoreGate,
  type StoreGateCallbacks,
  type StoreGateOptions,
} from './store-gate';
export * from './telemetry';
export {
  type EventMap,
  type EventName,
  TypedEventEmitter,
  type TypedEventEmitterOptions,
  type TypedListener,
} from './typed-emitter';
export { type UnlessAborted, unlessAborted } from './unless-aborted';
export {
  callUnprotected,
  runUnprotected,
  type UnprotectedContextBase,
  type UnprotectedRunOptions,
} from './unprotected-run';
export { type UnprotectedRunEntry, UnprotectedRuns } from './unprotected-runs';
export { unreadableDuplicateOf } from './unreadable-duplicate';
export { within } from './within';
