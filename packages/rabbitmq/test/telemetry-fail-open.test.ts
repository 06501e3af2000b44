import {
  type ClaimOptions,
  type ClaimReply,
  Idempotency,
  MemoryIdempotencyStore,
  type RecordId,
  StoreUnavailableError,
} from '@idempotent-consumer/core';
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
} from '@opentelemetry/sdk-trace-base';
import { deliveryPortFixture } from './delivery-port-fixture';

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
describe('DeliveryPort telemetry: a run failing open', () => {
  it('puts the idempotency key on the span with includeIdempotencyKey', async () => {
    const exporter = new InMemorySpanExporter();
    const tracerProvider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
    const { port, channel, message } = deliveryPortFixture({
      idempotency: new Idempotency(
        { store: new UnansweringStore(), logger: false },
        { storeFailureMode: 'open' },
      ),
      telemetryOptions: { tracerProvider, includeIdempotencyKey: true },
    });

    await port.process(message('pay-1'), channel);

    const [span] = exporter.getFinishedSpans();
    expect(span?.attributes).toMatchObject({
      'idempotency.outcome': 'UNPROTECTED',
      'idempotency.broker_action': 'ack',
      'idempotency.key': 'pay-1',
    });
  });
});
