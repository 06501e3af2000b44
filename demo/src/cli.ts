#!/usr/bin/env node
import { redactUrl } from '@idempotent-consumer/core/tools';
import { MultiBar, Presets } from 'cli-progress';
/**
 * The payments demo (README: `npm run demo`). Publishes a few thousand payment messages with duplicates,
 * consumes them with several consumer processes using idempotent-consumer, kills one with SIGKILL in the
 * middle of a handler, and prints what happened; then runs the same scenario without the SDK, side by side.
 */
import { Command, InvalidArgumentError, Option } from 'commander';
import { Redis } from 'ioredis';
import { BROKERS, type BrokerName, loadBroker } from './brokers';
import { buildPaymentStream } from './messages';
import { isEffectivelyOnce, renderReport } from './report';
import { runScenario, type ScenarioProgress, type ScenarioReport } from './scenario';
import { SIDE_EFFECTS, type SideEffectKind } from './side-effect-contract';

function integer(min: number) {
  return (value: string) => {
    const n = Number(value);
    if (!Number.isInteger(n) || n < min) throw new InvalidArgumentError(`an integer >= ${min} is expected`);
    return n;
  };
}
function ratio(value: string) {
  const n = Number(value);
  if (!(n >= 0 && n <= 1)) throw new InvalidArgumentError('a number from 0 to 1 is expected');
  return n;
}

const program = new Command()
  .name('idempotent-consumer-demo')
  .description('Payments consumed effectively-once on a real broker and Redis, next to a naive consumer')
  .addOption(new Option('--broker <name>', 'the message broker').choices(BROKERS).default('rabbitmq'))
  .option('--payments <n>', 'payments to publish', integer(1), 2000)
  .option('--duplicate-ratio <r>', 'share of payments published a second time', ratio, 0.25)
  .option('--consumers <n>', 'consumer processes', integer(1), 3)
  .option('--failure-rate <r>', 'share of handler runs where the payment gateway times out', ratio, 0.01)
  .option('--lease-ms <ms>', 'idempotency lease', integer(100), 3000)
  .option(
    '--timeout-ms <ms>',
    'give up waiting for payments after this long, per run',
    integer(1000),
    100_000,
  )
  .addOption(
    new Option('--redis-url <url>', 'Redis for the idempotency records, the ledger and BullMQ')
      .env('REDIS_URL')
      .default('redis://127.0.0.1:6379'),
  )
  .addOption(
    new Option('--amqp-url <url>', 'RabbitMQ (--broker rabbitmq)')
      .env('AMQP_URL')
      .default('amqp://guest:guest@127.0.0.1:5672'),
  )
  .addOption(
    new Option(
      '--kafka-brokers <host:port,...>',
      'Kafka bootstrap brokers (--broker kafka; default: a mock cluster started through kcat)',
    ).env('KAFKA_BROKERS'),
  )
  .addOption(
    new Option(
      '--sqs-endpoint <url>',
      'SQS endpoint (--broker sqs; default: an embedded fauxqs emulator)',
    ).env('SQS_ENDPOINT'),
  )
  .addOption(
    new Option('--nats-url <url>', 'NATS with JetStream (--broker nats)')
      .env('NATS_URL')
      .default('nats://127.0.0.1:4222'),
  )
  .addOption(
    new Option(
      '--side-effect <kind>',
      'where charges are written (postgres: through the transactional inbox)',
    )
      .choices(SIDE_EFFECTS)
      .default('redis'),
  )
  .option(
    '--database-url <url>',
    'PostgreSQL for --side-effect postgres',
    process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres',
  )
  .option('--no-baseline', 'skip the run without idempotent-consumer');

interface CliOptions {
  broker: BrokerName;
  amqpUrl: string;
  kafkaBrokers: string | undefined;
  sqsEndpoint: string | undefined;
  natsUrl: string;
  payments: number;
  duplicateRatio: number;
  consumers: number;
  failureRate: number;
  leaseMs: number;
  timeoutMs: number;
  redisUrl: string;
  baseline: boolean;
  sideEffect: SideEffectKind;
  databaseUrl: string;
}

async function main(): Promise<number> {
  const opts = program.parse().opts<CliOptions>();
  // The broker modules and the consumer processes (which inherit the environment) read these.
  process.env.AMQP_URL = opts.amqpUrl;
  process.env.REDIS_URL = opts.redisUrl; // BullMQ's queues live there too (--broker bullmq)
  if (opts.kafkaBrokers) process.env.KAFKA_BROKERS = opts.kafkaBrokers;
  if (opts.sqsEndpoint) process.env.SQS_ENDPOINT = opts.sqsEndpoint;
  process.env.NATS_URL = opts.natsUrl;
  const redis = new Redis(opts.redisUrl, {
    lazyConnect: true,
    maxRetriesPerRequest: 1,
    retryStrategy: () => null,
  });
  try {
    await redis.connect();
    await redis.ping();
  } catch (error) {
    console.error(
      `Redis is not reachable at ${redactUrl(opts.redisUrl)} (${(error as Error).message}).\n` +
        'Start it with: redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no\n' +
        'or pass --redis-url / REDIS_URL.',
    );
    return 2;
  }
  if (opts.sideEffect === 'postgres') {
    const problem = await (await import('./postgres-ledger.js')).postgresPreflight(opts.databaseUrl);
    if (problem) {
      console.error(problem);
      redis.disconnect();
      return 2;
    }
  }
  const broker = await loadBroker(opts.broker);
  const problem = await broker.preflight();
  if (problem) {
    console.error(problem);
    redis.disconnect();
    return 2;
  }

  const bars = new MultiBar(
    {
      clearOnComplete: false,
      hideCursor: true,
      noTTYOutput: true,
      notTTYSchedule: 3000,
      format: ' {bar} {percentage}% | {value}/{total} | {phase}',
    },
    Presets.shades_classic,
  );
  const progress: ScenarioProgress = {
    start: (total, phase) => bars.create(total, 0, { phase }),
    log: (line) => bars.log(`${line}\n`),
  };
  const stream = buildPaymentStream(String(Date.now()), opts.payments, opts.duplicateRatio);
  console.log(
    `Publishing ${opts.payments} payments + ${stream.duplicates} duplicates to ${opts.broker};\n` +
      `${opts.consumers} consumer processes, lease ${opts.leaseMs} ms, gateway failure rate ${opts.failureRate}`,
  );
  const reports: ScenarioReport[] = [];
  try {
    for (const mode of opts.baseline ? (['sdk', 'naive'] as const) : (['sdk'] as const)) {
      reports.push(
        await runScenario(
          broker,
          redis,
          stream,
          {
            brokerName: opts.broker,
            mode,
            consumers: opts.consumers,
            leaseMs: opts.leaseMs,
            failureRate: opts.failureRate,
            timeoutMs: opts.timeoutMs,
            quietMs: 2000,
            redisUrl: opts.redisUrl,
            sideEffect: opts.sideEffect,
            databaseUrl: opts.databaseUrl,
          },
          progress,
        ),
      );
    }
  } finally {
    bars.stop();
    await broker.close().catch(() => {});
    redis.disconnect();
  }
  console.log(`\n${renderReport(opts.broker, reports)}`);
  const sdk = reports[0]!;
  if (isEffectivelyOnce(sdk)) {
    console.log(
      `\nWith idempotent-consumer: ${sdk.chargesRecorded} charges for ${sdk.chargesExpected} payments, none lost.`,
    );
    const naive = reports[1];
    if (naive) console.log(`Without it: ${naive.doubleCharges} double charges, ${naive.lost} lost.`);
    return 0;
  }
  console.log(
    `\nFAILED: with idempotent-consumer, ${sdk.doubleCharges} double charges and ${sdk.lost} lost payments.`,
  );
  return 1;
}

main().then(
  (code) => process.exit(code),
  (error: Error) => {
    console.error(error.stack ?? error.message);
    process.exit(1);
  },
);
