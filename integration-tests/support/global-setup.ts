import { kafkaProvider } from './providers/kafka';
import { natsProvider } from './providers/nats';
import { rabbitmqProvider } from './providers/rabbitmq';
import { redisProvider } from './providers/redis';
import { mysqlProvider, postgresProvider } from './providers/sql';
import { sqsProvider } from './providers/sqs';
import { type FoundService, publishService, type ServiceName, type ServiceProvider } from './service';

const providers: Record<ServiceName, ServiceProvider> = {
  redis: redisProvider,
  rabbitmq: rabbitmqProvider,
  kafka: kafkaProvider,
  sqs: sqsProvider,
  nats: natsProvider,
  postgres: postgresProvider,
  mysql: mysqlProvider,
};

/** Services this run started, stopped by global-teardown.ts. */
export const started: FoundService[] = [];

/** Finds or starts every service once, before any integration suite, and publishes the result. */
export default async function globalSetup(): Promise<void> {
  const lines: string[] = [];
  await Promise.all(
    (Object.entries(providers) as [ServiceName, ServiceProvider][]).map(async ([name, provider]) => {
      let result: FoundService | { skip: string };
      try {
        result = await provider();
      } catch (error) {
        result = { skip: `its provider failed: ${(error as Error).message}` };
      }
      publishService(name, result);
      if ('skip' in result) lines.push(`  ${name}: NOT FOUND, its suites are skipped: ${result.skip}`);
      else {
        lines.push(`  ${name}: ${result.url} (${result.source})`);
        started.push(result);
      }
    }),
  );
  (globalThis as { __icStarted?: FoundService[] }).__icStarted = started;
  process.stderr.write(`\n[integration] services:\n${lines.sort().join('\n')}\n`);
}
