import { hasKcat, startKafkaMockCluster } from '../kafka-mock';
import { freePort } from '../net';
import type { ServiceProvider } from '../service';

/**
 * Kafka (integration-tests/README.md): KAFKA_BROKERS (comma-separated `host:port`), else librdkafka's mock cluster started
 * through kcat, else Apache Kafka in a container through testcontainers when a Docker engine answers,
 * else skipped with the reason. The URL is the comma-separated broker list.
 */
export const kafkaProvider: ServiceProvider = async () => {
  if (process.env.KAFKA_BROKERS)
    return { url: process.env.KAFKA_BROKERS, source: 'env', stop: async () => {} };
  let kcatFailure = 'kcat is not installed (apt-get install -y kcat)';
  if (hasKcat()) {
    try {
      const cluster = await startKafkaMockCluster();
      return { url: cluster.brokers.join(','), source: 'started', stop: () => cluster.stop() };
    } catch (error) {
      kcatFailure = `kcat's mock cluster did not start: ${(error as Error).message}`;
    }
  }
  const container = await startKafkaContainer().catch((error: Error) => error);
  if (!(container instanceof Error)) return container;
  return { skip: `no KAFKA_BROKERS; ${kcatFailure}; testcontainers: ${container.message}` };
};

/**
 * A single-node Apache Kafka (KRaft) in Docker. The host port is fixed before the start so the advertised
 * listener can carry it.
 */
async function startKafkaContainer() {
  const { GenericContainer, Wait } = await import('testcontainers');
  const port = await freePort();
  const container = await new GenericContainer('apache/kafka:3.8.0')
    .withExposedPorts({ container: 9092, host: port })
    .withEnvironment({
      KAFKA_NODE_ID: '1',
      KAFKA_PROCESS_ROLES: 'broker,controller',
      KAFKA_LISTENERS: 'PLAINTEXT://:9092,CONTROLLER://:9093',
      KAFKA_ADVERTISED_LISTENERS: `PLAINTEXT://127.0.0.1:${port}`,
      KAFKA_CONTROLLER_LISTENER_NAMES: 'CONTROLLER',
      KAFKA_LISTENER_SECURITY_PROTOCOL_MAP: 'CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT',
      KAFKA_CONTROLLER_QUORUM_VOTERS: '1@localhost:9093',
      KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR: '1',
      KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR: '1',
      KAFKA_TRANSACTION_STATE_LOG_MIN_ISR: '1',
      KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS: '0',
      KAFKA_NUM_PARTITIONS: '4',
      KAFKA_AUTO_CREATE_TOPICS_ENABLE: 'true',
    })
    .withWaitStrategy(Wait.forLogMessage(/Kafka Server started/))
    .withStartupTimeout(120_000)
    .start();
  return {
    url: `127.0.0.1:${port}`,
    source: 'testcontainers' as const,
    stop: async () => {
      await container.stop();
    },
  };
}
