/**
 * `@idempotent-consumer/core/kit`: the pieces every broker adapter needs, for adapter authors (a user's
 * code imports `@idempotent-consumer/core`). The RabbitMQ, Kafka and SQS adapters are built on them, so
 * the same concept has one behaviour and one name in each:
 *
 * - {@link TypedEventEmitter}: events whose listeners cannot change a decision;
 * - {@link StoreGate}: fail closed while the store does not answer, one probe loop per consumer;
 * - {@link LeaseKeeperSet}: the leases of a batch's claims kept alive until each message runs;
 * - {@link heartbeatIntervalFor}: how often a lease is extended;
 * - {@link RunOverrides}: the runner options a consumer may override, and their check;
 * - {@link sleep}: a wait that ends early, without rejecting, when the consumer stops;
 * - {@link extendHandlerContext}: the runner's handler context with the adapter's fields, `signal` still lazy;
 * - the option checks (`checkPositiveInteger`, …), each throwing `InvalidOptionError` with the option's name.
 *
 * @packageDocumentation
 */
export { extendHandlerContext } from './handler-context';
export { heartbeatIntervalFor } from './heartbeat';
export {
  LeaseKeeperSet,
  type LeaseKeeperSetCallbacks,
  type LeaseKeeperSetTimings,
} from './lease-keeper-set';
export {
  checkBackoffOptions,
  checkFiniteNonNegative,
  checkFunction,
  checkNonEmptyString,
  checkNonNegativeInteger,
  checkOneOf,
  checkPositiveInteger,
} from './option-checks';
export { checkRunOverrides, pickRunOverrides, type RunOverrides } from './run-overrides';
export { sleep } from './sleep';
export {
  DEFAULT_STORE_PROBE_BACKOFF,
  StoreGate,
  type StoreGateCallbacks,
  type StoreGateOptions,
} from './store-gate';
export {
  type EventMap,
  type EventName,
  TypedEventEmitter,
  type TypedEventEmitterOptions,
  type TypedListener,
} from './typed-emitter';
