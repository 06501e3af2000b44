import {
  type ClaimOptions,
  type ClaimReply,
  Idempotency,
  MemoryIdempotencyStore,
  type RecordId,
  StoreUnavailableError,
} from '@idempotent-consumer/core';
import { AdapterLog } from '@idempotent-consumer/core/kit';
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
} from '@opentelemetry/sdk-trace-base';
import type { ConsumeChannel } from '../src/amqp-types';
import { DeliveryAcks } from '../src/delivery-acks';
import { DeliveryProcessor } from '../src/delivery-processor';
import { KeyPolicy } from '../src/key-policy';
import { resolveConsumerOptions } from '../src/options';
import { Settler } from '../src/settler';
import { consumerTelemetry } from '../src/telemetry';
import { consumerTopology } from '../src/topology';

/** A store that does not answer claims (Redis down). */
class UnansweringStore extends MemoryIdempotencyStore {
  override async claim(_id: RecordId, _options: ClaimOptions): Promise<ClaimReply> {
    throw new StoreUnavailableError('the store does not answer');
  }
}

/**
 * `storeFailureMode: 'open'` runs the handler unprotected, but the message has its key: with
 * `includeIdempotencyKey` the span carries it, as in the Kafka and SQS adapters.
 */
describe('DeliveryProcessor telemetry: a run failing open', () => {
  it('puts the idempotency key on the span with includeIdempotencyKey', async () => {
    const exporter = new InMemorySpanExporter();
    const tracerProvider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
    const options = resolveConsumerOptions({ queue: 'work', delayTiersMs: [1000] }, 1000);
    const channel = { ack: () => {}, nack: () => {} } as unknown as ConsumeChannel;
    const acks = new DeliveryAcks(channel);
    const emit = (() => {}) as never;
    const settler = new Settler({
      topology: consumerTopology(options),
      publisher: () => Promise.reject(new Error('not used')),
      acks: () => acks,
      requeueAfterMs: 1000,
      signal: new AbortController().signal,
      abandoned: () => false,
      emit,
      markDeadLettered: async () => {},
    });
    const processor = new DeliveryProcessor<unknown>({
      idempotency: new Idempotency(
        { store: new UnansweringStore(), logger: false },
        { storeFailureMode: 'open' },
      ),
      handler: () => 'ok',
      options,
      keyPolicy: new KeyPolicy(options.idempotencyKey, options.missingKey),
      policy: { delayTiersMs: options.delayTiersMs, retryBackoff: options.retryBackoff, maxAttempts: 3 },
      runOptions: {},
      abandoning: new AbortController().signal,
      settler,
      admission: () => 'running',
      storeUnavailable: () => {},
      emit,
      log: AdapterLog.silent,
      telemetry: consumerTelemetry('work', { tracerProvider, includeIdempotencyKey: true }),
    } as never);
    const message = {
      content: Buffer.from('{}'),
      fields: { deliveryTag: 1, redelivered: false, exchange: '', routingKey: 'work', consumerTag: 'c' },
      properties: { headers: {}, messageId: 'pay-1' },
    } as never;

    await processor.process(message, channel);

    const [span] = exporter.getFinishedSpans();
    expect(span?.attributes).toMatchObject({
      'idempotency.outcome': 'UNPROTECTED',
      'idempotency.broker_action': 'ack',
      'idempotency.key': 'pay-1',
    });
  });
});
