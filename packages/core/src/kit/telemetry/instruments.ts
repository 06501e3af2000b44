import type { Counter, Histogram, Meter, UpDownCounter } from '@opentelemetry/api';
import {
  DURATION_BUCKETS_S,
  METRIC_BROKER_ACTIONS,
  METRIC_HANDLER_DURATION,
  METRIC_IN_FLIGHT,
  METRIC_OUTCOMES,
  METRIC_STORE_DURATION,
} from './metric-names';

/** The instruments of one meter. */
export interface TelemetryInstruments {
  readonly outcomes: Counter;
  readonly brokerActions: Counter;
  readonly handlerDuration: Histogram;
  readonly storeDuration: Histogram;
  readonly inFlight: UpDownCounter;
}

/** Creates the instruments on `meter`. */
export function createInstruments(meter: Meter): TelemetryInstruments {
  const advice = { explicitBucketBoundaries: DURATION_BUCKETS_S };
  return {
    outcomes: meter.createCounter(METRIC_OUTCOMES, {
      description: 'Claim outcomes of the messages consumed, by idempotency.outcome',
      unit: '{outcome}',
    }),
    brokerActions: meter.createCounter(METRIC_BROKER_ACTIONS, {
      description:
        'Decisions carried out on the broker for the messages consumed, by idempotency.broker_action',
      unit: '{action}',
    }),
    handlerDuration: meter.createHistogram(METRIC_HANDLER_DURATION, {
      description: 'Run time of the message handlers, claimed runs',
      unit: 's',
      advice,
    }),
    storeDuration: meter.createHistogram(METRIC_STORE_DURATION, {
      description:
        'Idempotency store round trips of a message, by idempotency.store.operation: claim (until the handler starts or the outcome is known) and write (the outcome written after the handler)',
      unit: 's',
      advice,
    }),
    inFlight: meter.createUpDownCounter(METRIC_IN_FLIGHT, {
      description: 'Claims held: handlers running or whose outcome is being written',
      unit: '{claim}',
    }),
  };
}
