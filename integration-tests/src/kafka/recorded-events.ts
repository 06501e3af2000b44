import type { KafkaEventEmitter, KafkaIdempotencyEvents } from '@idempotent-consumer/kafka';

/** One event a wrapper emitted: its name as `type`, then its payload's fields. */
export type RecordedEvent = {
  [K in keyof KafkaIdempotencyEvents]: { type: K } & KafkaIdempotencyEvents[K][0];
}[keyof KafkaIdempotencyEvents];

const NAMES: (keyof KafkaIdempotencyEvents)[] = [
  'settled',
  'retryScheduled',
  'deadLettered',
  'missingKey',
  'storeUnavailable',
  'storeRecovered',
  'storeError',
  'brokerError',
  'leaseLost',
];

/** Records every event of a wrapper into `into`, in order; returns the wrapper. */
export function recordEvents<W extends { readonly events: KafkaEventEmitter }>(
  wrapper: W,
  into: RecordedEvent[],
): W {
  for (const type of NAMES) {
    wrapper.events.on(type, (payload: object) => into.push({ type, ...payload } as RecordedEvent));
  }
  return wrapper;
}
