import {
  type ClaimOptions,
  type ClaimReply,
  HandlerTimeoutError,
  Idempotency,
  MemoryIdempotencyStore,
  type RecordId,
  StoreUnavailableError,
} from '@idempotent-consumer/core';
import { createIdempotentConsumer, type RabbitMqIdempotencyEvents, RETRY_HEADERS } from '../src';
import type { RabbitMqHandler } from '../src/handler';
import { fakeConnection } from './fake-amqp';

/** A store whose claims go unanswered (Redis down), but which answers the start-up ping. */
class UnansweringClaims extends MemoryIdempotencyStore {
  override async claim(_id: RecordId, _options: ClaimOptions): Promise<ClaimReply> {
    throw new StoreUnavailableError('the store does not answer');
  }
}

async function failOpenConsumer(handler: RabbitMqHandler<unknown>, handlerTimeoutMs = 0) {
  const fake = fakeConnection();
  const idempotency = new Idempotency(
    { store: new UnansweringClaims(), logger: false },
    { storeFailureMode: 'open', leaseMs: 1000, handlerTimeoutMs },
  );
  const consumer = createIdempotentConsumer(
    { idempotency, connection: fake.connection, logger: false },
    {
      queue: 'work',
      delayTiersMs: [10, 50],
      retryBackoff: { baseMs: 10, maxMs: 50, jitter: 'none' },
      stopTimeoutMs: 1000,
    },
    handler,
  );
  await consumer.start();
  return { ...fake, consumer };
}

/** Resolves with the reason the signal aborts with. */
const aborted = (signal: AbortSignal): Promise<unknown> =>
  new Promise((resolve) => signal.addEventListener('abort', () => resolve(signal.reason), { once: true }));

/**
 * `storeFailureMode: 'open'` runs a keyed delivery's handler without a claim, through the runner, whose
 * own context signal never aborts: the consumer must bound it as it bounds a run without a key
 * (`missingKey: 'process'`) and as the Kafka and SQS adapters bound a fail-open run.
 */
describe('IdempotentConsumer: a handler run failing open (storeFailureMode open)', () => {
  it('has its signal aborted by handlerTimeoutMs, and the delivery goes to a delay tier', async () => {
    let reason: Promise<unknown> | undefined;
    const { channel, confirm, consumer } = await failOpenConsumer(({ signal, outcome }) => {
      expect(outcome).toBe('UNPROTECTED');
      reason = aborted(signal);
      return reason; // resolves only once the signal aborts
    }, 50);
    const settled = new Promise<RabbitMqIdempotencyEvents['settled'][0]>((resolve) =>
      consumer.once('settled', resolve),
    );
    channel.deliver('{}', { messageId: 'k1' });

    const event = await settled;
    expect(await reason).toBeInstanceOf(HandlerTimeoutError);
    expect(event.decision).toMatchObject({ action: 'retry', reason: 'handler-error' });
    expect(confirm.published[0]!.options.headers[RETRY_HEADERS.reason]).toBe('handler-error');
    await consumer.stop();
  });

  it('has its signal aborted when the consumer stops, as a handler run without a key has', async () => {
    let reason: Promise<unknown> | undefined;
    let started: () => void = () => {};
    const running = new Promise<void>((resolve) => {
      started = resolve;
    });
    const { channel, consumer } = await failOpenConsumer(({ signal }) => {
      reason = aborted(signal);
      started();
      return reason;
    });
    channel.deliver('{}', { messageId: 'k2' });
    await running;

    const { abandoned } = await consumer.stop();
    expect(abandoned).toBe(0); // the handler ended on its signal within stopTimeoutMs
    expect(await reason).toBeDefined();
  });
});
