import { randomUUID } from 'node:crypto';
import type { Idempotency } from '@idempotent-consumer/core';
import { hasKcat, startKafkaMockCluster } from '@idempotent-consumer/demo/dist/brokers/kafka-mock';
import { idempotentEachBatch } from '@idempotent-consumer/kafka';
import { Kafka, logLevel } from 'kafkajs';
import type { BareScripts } from '../bare-scripts';
import { type CpuMeter, findProcess } from '../cpu-meter';
import { type AdapterRow, row, settleCounter } from './adapter-row';

const TIMINGS = {
  sessionTimeout: 10_000,
  rebalanceTimeout: 10_000,
  heartbeatInterval: 1000,
  maxWaitTimeInMs: 50,
};

/**
 * Kafka (`KAFKA_BROKERS`, else librdkafka's mock cluster through kcat, as the integration suites start it):
 * `messages` messages (header `idempotency-key`) in one topic, consumed from the beginning by three
 * consumer groups with KafkaJS `eachBatch`: one resolving each offset after a no-op handler; one with
 * `scripts` claiming each message (with the value's fingerprint, as the adapter's default) before the
 * handler and completing it after (offsets resolved as the completions answer); one through
 * `idempotentEachBatch` with the same handler. `meter` reads the mock broker's CPU time too (the `kcat`
 * process of the cluster this bench started).
 * @throws Error when there is neither KAFKA_BROKERS nor kcat.
 */
export async function benchKafka(
  idempotency: Idempotency,
  scripts: BareScripts,
  messages: number,
  meter: CpuMeter,
): Promise<AdapterRow> {
  let stop = async () => {};
  let brokers = process.env.KAFKA_BROKERS?.split(',');
  if (!brokers) {
    if (!hasKcat()) throw new Error('no KAFKA_BROKERS and no kcat (apt-get install -y kcat)');
    const cluster = await startKafkaMockCluster({ brokers: 1 });
    brokers = cluster.brokers;
    stop = () => cluster.stop();
    meter = meter.withBroker(findProcess('kcat', cluster.processGroup));
  }
  const kafka = new Kafka({ clientId: 'bench', brokers, logLevel: logLevel.NOTHING });
  const topic = `bench.${process.pid}.${randomUUID().slice(0, 8)}`;
  const producer = kafka.producer({ allowAutoTopicCreation: true });
  try {
    await producer.connect();
    for (let i = 0; i < messages; i += 1000) {
      await producer.send({
        topic,
        messages: Array.from({ length: Math.min(1000, messages - i) }, (_, j) => ({
          key: String((i + j) % 64),
          value: `{"n":${i + j}}`,
          headers: { 'idempotency-key': `${topic}-${i + j}` },
        })),
      });
    }
    type Consumer = ReturnType<Kafka['consumer']>;
    const consume = async (
      eachBatch: (consumer: Consumer, groupId: string) => Parameters<Consumer['run']>[0],
    ) => {
      const groupId = `${topic}.${randomUUID().slice(0, 6)}`;
      const consumer = kafka.consumer({ groupId, ...TIMINGS });
      await consumer.connect();
      await consumer.subscribe({ topic, fromBeginning: true });
      await consumer.run(eachBatch(consumer, groupId));
      return consumer;
    };

    const bare = settleCounter(messages, meter);
    const bareConsumer = await consume(() => ({
      eachBatch: async ({ batch, resolveOffset, heartbeat }) => {
        for (const message of batch.messages) {
          await (async () => {})();
          resolveOffset(message.offset);
          bare.settled();
        }
        await heartbeat();
      },
    }));
    const bareSettled = await bare.done;
    await bareConsumer.disconnect();

    // The same loop with the scripts around the handler: each claim answered before its handler, the
    // completion written while the next message claims (as the adapter overlaps them), and an offset
    // resolved only once its completion answered, in order.
    const withScripts = settleCounter(messages, meter);
    const scriptsConsumer = await consume(() => ({
      eachBatch: async ({ batch, resolveOffset, heartbeat }) => {
        let tail: Promise<void> = Promise.resolve();
        for (const message of batch.messages) {
          const key = message.headers!['idempotency-key']!.toString();
          const reply = await scripts.claim(key, message.value ?? undefined);
          // A batch fetched again before its offsets were committed (a rebalance): already counted.
          const fresh = reply[0] === 'ACQUIRED';
          await (async () => {})();
          const completed = fresh ? scripts.complete(key, reply[1] as number, undefined) : undefined;
          tail = Promise.all([tail, completed]).then(() => {
            resolveOffset(message.offset);
            if (fresh) withScripts.settled();
          });
        }
        await tail;
        await heartbeat();
      },
    }));
    const scriptsSettled = await withScripts.done;
    await scriptsConsumer.disconnect();

    const sdk = settleCounter(messages, meter);
    let close = () => {};
    const sdkConsumer = await consume((consumer, groupId) => {
      const eachBatch = idempotentEachBatch(
        { idempotency, consumer },
        { groupId, deadLetterTopic: false },
        async () => {
          sdk.settled();
        },
      );
      close = eachBatch.close;
      return { eachBatch };
    });
    const sdkSettled = await sdk.done;
    await sdkConsumer.disconnect();
    close();
    return row('Kafka (KafkaJS)', 'eachBatch', messages, {
      bare: bareSettled,
      scripts: scriptsSettled,
      sdk: sdkSettled,
    });
  } finally {
    await producer.disconnect().catch(() => {});
    await stop();
  }
}
