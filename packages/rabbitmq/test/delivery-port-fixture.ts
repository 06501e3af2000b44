import { Idempotency, MemoryIdempotencyStore, type TelemetryOptions } from '@idempotent-consumer/core';
import { AdapterLog, StoreGate } from '@idempotent-consumer/core/kit';
import type { ConsumeChannel } from '../src/amqp-types';
import { DeliveryAcks } from '../src/delivery-acks';
import { DeliveryActions } from '../src/delivery-actions';
import { DeliveryPort, type DeliveryPortContext } from '../src/delivery-port';
import type { Emit } from '../src/events';
import { resolveConsumerOptions } from '../src/options';
import { consumerTelemetry } from '../src/telemetry';
import { consumerTopology } from '../src/topology';

/** A delivery port of queue `work` on a fake channel whose acks and nacks are recorded. */
export function deliveryPortFixture(
  overrides: Partial<DeliveryPortContext<unknown>> & {
    readonly idempotency?: Idempotency;
    readonly delayTiersMs?: number[];
    readonly telemetryOptions?: TelemetryOptions;
    readonly emit?: Emit;
  } = {},
) {
  const options = resolveConsumerOptions(
    { queue: 'work', delayTiersMs: overrides.delayTiersMs ?? [1000] },
    1000,
  );
  const stop = new AbortController();
  const nacked: unknown[] = [];
  const acked: unknown[] = [];
  const channel = {
    ack: (m: unknown) => acked.push(m),
    nack: (m: unknown) => nacked.push(m),
  } as unknown as ConsumeChannel;
  const acks = new DeliveryAcks(channel);
  const emit = overrides.emit ?? ((() => {}) as Emit);
  const actions = new DeliveryActions({
    topology: consumerTopology(options),
    publisher: () => Promise.reject(new Error('not used')),
    acks: () => acks,
    requeueAfterMs: options.delayTiersMs[0]!,
    signal: stop.signal,
    abandoned: () => false,
    emit,
  });
  const idempotency =
    overrides.idempotency ?? new Idempotency({ store: new MemoryIdempotencyStore(), logger: false });
  const port = new DeliveryPort<unknown>({
    idempotency,
    handler: () => 'ok',
    options,
    policy: {
      delayTiersMs: options.delayTiersMs,
      retryBackoff: options.retryBackoff,
      maxAttempts: 3,
      maxConflictDelayMs: 5000,
    },
    actions,
    admission: () => 'running',
    gate: new StoreGate(idempotency.store),
    emit,
    log: AdapterLog.silent,
    telemetry: consumerTelemetry('work', overrides.telemetryOptions),
    stopping: stop.signal,
    abandoning: new AbortController().signal,
    ...overrides,
  });
  const message = (messageId: string) =>
    ({
      content: Buffer.from('{}'),
      fields: { deliveryTag: 1, redelivered: false, exchange: '', routingKey: 'work', consumerTag: 'c' },
      properties: { headers: {}, messageId },
    }) as never;
  return { port, channel, stop, nacked, acked, message };
}
