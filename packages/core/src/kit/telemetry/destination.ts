import type { Attributes, SpanOptions } from '@opentelemetry/api';
import {
  ATTR_IDEMPOTENCY_BROKER_ACTION,
  ATTR_IDEMPOTENCY_OUTCOME,
  ATTR_IDEMPOTENCY_STORE_OPERATION,
  ATTR_MESSAGING_CONSUMER_GROUP_NAME,
  ATTR_MESSAGING_DESTINATION_NAME,
  ATTR_MESSAGING_OPERATION_NAME,
  ATTR_MESSAGING_OPERATION_TYPE,
  ATTR_MESSAGING_SYSTEM,
} from './attributes';

/**
 * What every message of one destination (queue, topic) shares: the span name and start options, and the
 * metric attribute sets, built once so that a message allocates none of them.
 */
export class TelemetryDestination {
  /** `messaging.destination.name`. */
  readonly name: string;
  /** `process <destination>`. */
  readonly spanName: string;
  /** Kind CONSUMER, with the messaging attributes known before the message is read. */
  readonly spanOptions: SpanOptions;
  /** `messaging.system` and `messaging.destination.name`: the attributes of every metric. */
  readonly base: Attributes;
  /** {@link TelemetryDestination.base} with `idempotency.store.operation` `claim`. */
  readonly claim: Attributes;
  /** {@link TelemetryDestination.base} with `idempotency.store.operation` `write`. */
  readonly write: Attributes;
  readonly #outcomes = new Map<string, Attributes>();
  readonly #actions = new Map<string, Attributes>();

  /**
   * @param spanKindConsumer - `SpanKind.CONSUMER` of the loaded API.
   */
  constructor(system: string, name: string, consumerGroup: string | undefined, spanKindConsumer: number) {
    this.name = name;
    this.spanName = `process ${name}`;
    const span: Attributes = {
      [ATTR_MESSAGING_SYSTEM]: system,
      [ATTR_MESSAGING_OPERATION_TYPE]: 'process',
      [ATTR_MESSAGING_OPERATION_NAME]: 'process',
      [ATTR_MESSAGING_DESTINATION_NAME]: name,
    };
    if (consumerGroup !== undefined) span[ATTR_MESSAGING_CONSUMER_GROUP_NAME] = consumerGroup;
    this.spanOptions = { kind: spanKindConsumer, attributes: span };
    this.base = { [ATTR_MESSAGING_SYSTEM]: system, [ATTR_MESSAGING_DESTINATION_NAME]: name };
    this.claim = { ...this.base, [ATTR_IDEMPOTENCY_STORE_OPERATION]: 'claim' };
    this.write = { ...this.base, [ATTR_IDEMPOTENCY_STORE_OPERATION]: 'write' };
  }

  /** The metric attributes with `idempotency.outcome` (one set per outcome, kept). */
  outcome(outcome: string): Attributes {
    return cached(this.#outcomes, outcome, this.base, ATTR_IDEMPOTENCY_OUTCOME);
  }

  /** The metric attributes with `idempotency.broker_action` (one set per action, kept). */
  action(action: string): Attributes {
    return cached(this.#actions, action, this.base, ATTR_IDEMPOTENCY_BROKER_ACTION);
  }
}

function cached(map: Map<string, Attributes>, value: string, base: Attributes, name: string): Attributes {
  let attributes = map.get(value);
  if (attributes === undefined) {
    attributes = { ...base, [name]: value };
    map.set(value, attributes);
  }
  return attributes;
}
