/**
 * The demo on Kafka (KafkaJS): the producer sends payment messages with the `idempotency-key` header
 * (keyed by payment id, so a payment's duplicates share a partition); each consumer process joins one
 * consumer group and consumes with `idempotentEachMessage` (`sdk`) or a plain `eachMessage` that charges
 * (`naive`). Without KAFKA_BROKERS, `preflight` starts librdkafka's mock cluster through kcat.
 */
import {
  type EachMessagePayloadLike,
  idempotentEachMessage,
  type KafkaMessageLike,
} from '@idempotent-consumer/kafka';
import { Kafka, logLevel, type Producer } from 'kafkajs';
import type { DemoBroker, DemoConsumerContext, DemoMode, PaymentMessage } from '../broker';
import { hasKcat, type KafkaMockCluster, startKafkaMockCluster } from './kafka-mock';

/**
 * Group timings short enough that the group notices a SIGKILLed member within seconds (the mock cluster
 * rebalances `sessionTimeout - 1000` ms after a member goes quiet).
 */
const CONSUMER_TIMINGS = {
  sessionTimeout: 4000,
  rebalanceTimeout: 4000,
  heartbeatInterval: 400,
  maxWaitTimeInMs: 100,
};

const client = (brokers: string[], clientId: string) =>
  new Kafka({ clientId, brokers, logLevel: logLevel.NOTHING, retry: { retries: 10 } });

const parse = (message: KafkaMessageLike) => JSON.parse(message.value!.toString('utf8')) as PaymentMessage;

/** The producer side: finds or starts the brokers, one topic per run. */
export function kafkaBroker(): DemoBroker {
  let mock: KafkaMockCluster | undefined;
  let brokers: string[] | undefined;
  let producer: Producer | undefined;
  let topic: string | undefined;

  return {
    name: 'kafka',
    async preflight() {
      if (process.env.KAFKA_BROKERS) brokers = process.env.KAFKA_BROKERS.split(',');
      else {
        if (!hasKcat()) {
          return 'No KAFKA_BROKERS and no kcat to start a mock Kafka cluster; install it with `apt-get install -y kcat` or set KAFKA_BROKERS';
        }
        try {
          mock = await startKafkaMockCluster();
          brokers = mock.brokers;
        } catch (error) {
          return `kcat's mock Kafka cluster did not start (${(error as Error).message}); set KAFKA_BROKERS instead`;
        }
      }
      try {
        producer = client(brokers, 'demo-producer').producer({ allowAutoTopicCreation: true });
        await producer.connect();
        return null;
      } catch (error) {
        return `Kafka is not reachable at ${brokers.join(',')} (${(error as Error).message})`;
      }
    },
    async setup(runId: string, _mode: DemoMode) {
      if (!brokers) throw new Error('preflight() first');
      topic = `demo.${runId}.payments`; // created on first produce (the mock cannot createTopics)
      return { brokers: brokers.join(','), topic, groupId: `demo.${runId}.charges` };
    },
    async publish(messages: readonly PaymentMessage[]) {
      if (!producer || !topic) throw new Error('setup() first');
      await producer.send({
        topic,
        messages: messages.map((m) => ({
          key: m.paymentId,
          value: JSON.stringify(m),
          headers: { 'idempotency-key': m.idempotencyKey },
        })),
      });
    },
    async teardown() {
      topic = undefined; // the mock keeps topics in memory until it stops; nothing to delete per run
    },
    async close() {
      await producer?.disconnect().catch(() => {});
      producer = undefined;
      await mock?.stop();
      mock = undefined;
    },
  };
}

/** Times a consumer process replaces its KafkaJS consumer that the mock cluster stopped while joining. */
const JOIN_ATTEMPTS = 5;
/** How long a consumer process waits for its consumer to join the group, per attempt, in ms. */
const JOIN_WAIT_MS = 30_000;

/** The consumer side, in each consumer process. */
export async function startConsumer(context: DemoConsumerContext): Promise<{ stop(): Promise<void> }> {
  const { brokers, topic, groupId } = context.config;
  if (!brokers || !topic || !groupId)
    throw new Error('The kafka demo consumer needs brokers, topic and groupId');
  const kafka = client(brokers.split(','), `demo-consumer-${process.pid}`);

  let producer: Producer | undefined;
  if (context.mode === 'sdk') {
    if (!context.idempotency) throw new Error('sdk mode needs the idempotency runner');
    producer = kafka.producer();
    await producer.connect();
  }

  /** Starts one KafkaJS consumer with its handler; resolves once it joined, was stopped, or waited too long. */
  const start = async () => {
    const consumer = kafka.consumer({ groupId, ...CONSUMER_TIMINGS });
    await consumer.connect();
    await consumer.subscribe({ topic, fromBeginning: true });
    let handle: (payload: EachMessagePayloadLike) => Promise<void>;
    let close = () => {};
    if (context.mode === 'sdk') {
      const eachMessage = idempotentEachMessage(
        { idempotency: context.idempotency!, consumer, producer },
        {
          groupId,
          retryBackoff: { baseMs: 250, factor: 2, maxMs: 2000 },
          maxInlineDelayMs: 2000,
        },
        ({ message, fencingToken }) => context.charge(parse(message), fencingToken),
      );
      eachMessage.events.on('deadLettered', () => {
        context.counters.deadLettered++;
      });
      handle = eachMessage;
      close = eachMessage.close;
    } else {
      // The baseline: charge, and let KafkaJS resolve the offset; a throw makes KafkaJS fetch it again.
      handle = async ({ message }) => context.charge(parse(message));
    }
    // Joined, or stopped for good: librdkafka's mock cluster answers a SyncGroup it finds late with
    // INVALID_REQUEST, and KafkaJS then stops the consumer without a restart (`CRASH`, `restart: false`),
    // so it never joins; seen on a loaded machine for a consumer that joins a group being rebalanced.
    const joined = new Promise<boolean>((resolve) => {
      consumer.on(consumer.events.GROUP_JOIN, () => resolve(true));
      consumer.on(consumer.events.CRASH, ({ payload }) => {
        if (!payload.restart) resolve(false);
      });
    });
    await consumer.run({
      eachMessage: async (payload) => {
        context.counters.deliveries++;
        await handle(payload);
      },
    });
    let timer: NodeJS.Timeout | undefined;
    const waited = new Promise<undefined>((resolve) => {
      timer = setTimeout(() => resolve(undefined), JOIN_WAIT_MS);
    });
    const outcome = await Promise.race([joined, waited]);
    clearTimeout(timer);
    return { consumer, close, stopped: outcome === false };
  };

  // A consumer the mock stopped while joining is replaced, so this process consumes: before, it waited
  // 30 s for a join that could not come (a third to three quarters of a 300-payment Kafka demo run) and
  // then went on without a consumer.
  let current = await start();
  for (let attempt = 1; current.stopped && attempt < JOIN_ATTEMPTS; attempt++) {
    current.close();
    await current.consumer.disconnect().catch(() => {});
    current = await start();
  }
  const { consumer, close } = current;

  return {
    async stop() {
      // The wrapper first: a completion write waiting for Redis would hold the disconnect (Kafka README).
      close();
      await consumer.disconnect().catch(() => {});
      await producer?.disconnect().catch(() => {});
    },
  };
}
