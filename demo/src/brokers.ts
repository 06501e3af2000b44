import type { DemoBroker, DemoConsumerModule } from './broker';

/** The brokers the demo runs on. */
export const BROKERS = ['rabbitmq', 'kafka', 'sqs', 'bullmq', 'nats'] as const;
/** One of {@link BROKERS}. */
export type BrokerName = (typeof BROKERS)[number];

/** Loads the producer side of a broker (only the chosen broker's client is loaded). */
export async function loadBroker(name: BrokerName): Promise<DemoBroker> {
  switch (name) {
    case 'rabbitmq':
      return (await import('./brokers/rabbitmq.js')).rabbitmqBroker();
    case 'kafka':
      return (await import('./brokers/kafka.js')).kafkaBroker();
    case 'sqs':
      return (await import('./brokers/sqs.js')).sqsBroker();
    case 'bullmq':
      return (await import('./brokers/bullmq.js')).bullmqBroker();
    case 'nats':
      return (await import('./brokers/nats.js')).natsBroker();
  }
}

/** Loads the consumer side of a broker. */
export async function loadConsumerModule(name: string): Promise<DemoConsumerModule> {
  switch (name) {
    case 'rabbitmq':
      return import('./brokers/rabbitmq.js');
    case 'kafka':
      return import('./brokers/kafka.js');
    case 'sqs':
      return import('./brokers/sqs.js');
    case 'bullmq':
      return import('./brokers/bullmq.js');
    case 'nats':
      return import('./brokers/nats.js');
    default:
      throw new Error(`Unknown broker ${name}`);
  }
}
