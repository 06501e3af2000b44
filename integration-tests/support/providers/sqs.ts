import { isListening } from '../net';
import type { FoundService, ServiceProvider } from '../service';
import { startSqsEmulator } from '../sqs-emulator';

/** LocalStack's image and edge port, for testcontainers. */
const LOCALSTACK_IMAGE = 'localstack/localstack:3.8';
const EDGE_PORT = 4566;

/**
 * SQS: `SQS_ENDPOINT`; else something on 127.0.0.1:4566 (LocalStack or fauxqs's standard port); else the
 * fauxqs emulator started in this process; else LocalStack through testcontainers when a Docker engine
 * answers; else skipped with the reasons.
 */
export const sqsProvider: ServiceProvider = async () => {
  if (process.env.SQS_ENDPOINT) return { url: process.env.SQS_ENDPOINT, source: 'env', stop: async () => {} };
  if (await isListening(EDGE_PORT)) {
    return { url: `http://127.0.0.1:${EDGE_PORT}`, source: 'local', stop: async () => {} };
  }
  const reasons: string[] = [];
  try {
    return await startSqsEmulator();
  } catch (error) {
    reasons.push(`fauxqs did not start (${(error as Error).message})`);
  }
  try {
    return await startLocalStack();
  } catch (error) {
    reasons.push(`no LocalStack through testcontainers (${(error as Error).message})`);
  }
  return { skip: `no SQS_ENDPOINT, nothing on 127.0.0.1:${EDGE_PORT}; ${reasons.join('; ')}` };
};

async function startLocalStack(): Promise<FoundService> {
  const { GenericContainer, Wait, getContainerRuntimeClient } = await import('testcontainers');
  await getContainerRuntimeClient(); // throws when no Docker engine answers
  const container = await new GenericContainer(LOCALSTACK_IMAGE)
    .withEnvironment({ SERVICES: 'sqs' })
    .withExposedPorts(EDGE_PORT)
    .withWaitStrategy(Wait.forLogMessage('Ready.'))
    .start();
  return {
    url: `http://${container.getHost()}:${container.getMappedPort(EDGE_PORT)}`,
    source: 'testcontainers',
    stop: async () => {
      await container.stop();
    },
  };
}
