import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { describeWithServices } from '../../support/service';

const run = promisify(execFile);
const cli = join(__dirname, '..', '..', '..', 'demo', 'dist', 'cli.js');

/**
 * The README's demo, small: every broker's run must charge each payment exactly once with a consumer
 * killed mid-handler, and say so in its table. (`npm test` builds demo/dist first.)
 */
async function runDemo(broker: string, env: Record<string, string>): Promise<string> {
  if (!existsSync(cli)) throw new Error(`${cli} is missing: build first (npm test does)`);
  const { stdout } = await run(
    process.execPath,
    [cli, '--broker', broker, '--payments', '300', '--consumers', '2', '--no-baseline'],
    { env: { ...process.env, ...env }, timeout: 110_000, maxBuffer: 16 * 1024 * 1024 },
  );
  return stdout;
}

function expectEffectivelyOnce(stdout: string): void {
  const row = (label: string) => stdout.match(new RegExp(`${label}\\s*│\\s*(\\d+)`))?.[1];
  expect(row('charges recorded')).toBe('300');
  expect(row('charges expected')).toBe('300');
  expect(row('double charges')).toBe('0');
  expect(row('lost payments')).toBe('0');
  expect(row('consumers killed mid-handler')).toBe('1');
  expect(stdout).toContain('With idempotent-consumer: 300 charges for 300 payments, none lost.');
}

describeWithServices(['redis', 'rabbitmq'], 'demo on RabbitMQ', ({ redis, rabbitmq }) => {
  it('charges every payment once with a consumer killed mid-handler', async () => {
    expectEffectivelyOnce(await runDemo('rabbitmq', { REDIS_URL: redis, AMQP_URL: rabbitmq }));
  });
});

describeWithServices(['redis', 'kafka'], 'demo on Kafka', ({ redis, kafka }) => {
  it('charges every payment once with a consumer killed mid-handler', async () => {
    expectEffectivelyOnce(await runDemo('kafka', { REDIS_URL: redis, KAFKA_BROKERS: kafka }));
  });
});

describeWithServices(['redis', 'sqs'], 'demo on SQS', ({ redis, sqs }) => {
  it('charges every payment once with a consumer killed mid-handler', async () => {
    expectEffectivelyOnce(await runDemo('sqs', { REDIS_URL: redis, SQS_ENDPOINT: sqs }));
  });
});
