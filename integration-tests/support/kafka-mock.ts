/**
 * The kcat mock-cluster starter. It lives in the demo (demo/src/brokers/kafka-mock.ts), which must run on
 * its own from `dist/`; the test provider uses the same file.
 */
export { hasKcat, type KafkaMockCluster, startKafkaMockCluster } from '../../demo/src/brokers/kafka-mock';
