import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { describeWithServices } from '../../support/service';

const run = promisify(execFile);
const cli = join(__dirname, '..', '..', '..', 'demo', 'dist', 'cli.js');

/**
 * The README's demo, small: every broker's run must charge each payment exactly once with a consumer
 * killed mid-handler, and say so in its table. The kill happens by construction (every consumer is armed
 * and the first handler run after a third of the stream is published, in whichever process, is the one;
 * see demo/src/consumer-process.ts), so the assertions hold on a loaded machine too: nothing here depends
 * on timing. (`npm test` builds demo/dist first.)
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
  const row = (label: string) => {
    const value = stdout.match(new RegExp(`│ {1,3}${label}\\s*│\\s*(\\d+)`))?.[1];
    if (value === undefined) throw new Error(`no row "${label}" in the demo's output:\n${stdout}`);
    return Number(value);
  };
  expect(row('payments')).toBe(300);
  expect(row('charged')).toBe(300);
  expect(row('charged more than once')).toBe(0);
  expect(row('never charged \\(lost\\)')).toBe(0);
  expect(row('extra charges \\(double charges\\)')).toBe(0);
  expect(row('killed mid-handler \\(SIGKILL\\)')).toBe(1);
  // The rows explain each other: every handler run timed out, was killed, or charged.
  expect(row('handler runs')).toBe(
    row('gateway timeout, nothing charged') + row('killed mid-handler \\(SIGKILL\\)') + row('charged'),
  );
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

describeWithServices(['redis'], 'demo on BullMQ', ({ redis }) => {
  it('charges every payment once with a consumer killed mid-handler', async () => {
    expectEffectivelyOnce(await runDemo('bullmq', { REDIS_URL: redis }));
  });
});

describeWithServices(['redis', 'nats'], 'demo on NATS JetStream', ({ redis, nats }) => {
  it('charges every payment once with a consumer killed mid-handler', async () => {
    expectEffectivelyOnce(await runDemo('nats', { REDIS_URL: redis, NATS_URL: nats }));
  });
});

describe('demo preflight', () => {
  /** The demo's stderr and exit status when it stops before running (a service not reachable). */
  async function stopped(args: string[]): Promise<{ code: number; stderr: string }> {
    if (!existsSync(cli)) throw new Error(`${cli} is missing: build first (npm test does)`);
    return run(process.execPath, [cli, ...args], { timeout: 60_000 }).then(
      () => ({ code: 0, stderr: '' }),
      (error: { code: number; stderr: string }) => ({ code: error.code, stderr: error.stderr }),
    );
  }

  it.each([
    [
      ['--redis-url', 'redis://demo:secret@127.0.0.1:1'],
      /Redis is not reachable at redis:\/\/demo:\*\*\*@127\.0\.0\.1:1/,
    ],
    [
      ['--redis-url', 'demo:secret@127.0.0.1:1'],
      /Redis is not reachable at redis:\/\/demo:\*\*\*@127\.0\.0\.1:1/,
    ],
    [
      ['--amqp-url', 'amqp://demo:secret@127.0.0.1:1'],
      /RabbitMQ is not reachable at amqp:\/\/demo:\*\*\*@127\.0\.0\.1:1/,
    ],
    [
      ['--broker', 'nats', '--nats-url', 'nats://demo:secret@127.0.0.1:1'],
      /NATS with JetStream is not reachable at nats:\/\/demo:\*\*\*@127\.0\.0\.1:1/,
    ],
  ])(
    '%j: the service not reachable is told, its password hidden (was: printed whole)',
    async (args, told) => {
      const { code, stderr } = await stopped(args);
      expect(code).toBe(2);
      expect(stderr).toMatch(told);
      expect(stderr).not.toContain('secret');
    },
  );
});
