/** The meter's instrumentation scope name (and the tracer's). */
export const INSTRUMENTATION_SCOPE = 'idempotent-consumer';

/** `idempotency.outcomes`: counter of claim outcomes, by `idempotency.outcome`. */
export const METRIC_OUTCOMES = 'idempotency.outcomes';
/** `idempotency.broker_actions`: counter of the adapters' decisions, by `idempotency.broker_action`. */
export const METRIC_BROKER_ACTIONS = 'idempotency.broker_actions';
/** `idempotency.handler.duration`: histogram of handler run times, in seconds. */
export const METRIC_HANDLER_DURATION = 'idempotency.handler.duration';
/** `idempotency.store.duration`: histogram of store round trips (`claim`, `write`), in seconds. */
export const METRIC_STORE_DURATION = 'idempotency.store.duration';
/** `idempotency.in_flight`: up-down counter of the claims held (handler running or its outcome being written). */
export const METRIC_IN_FLIGHT = 'idempotency.in_flight';

/** Bucket boundaries of the duration histograms, in seconds (the semantic conventions' advice for durations). */
export const DURATION_BUCKETS_S = [
  0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 30, 60,
];
