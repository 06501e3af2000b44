import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { connect } from 'amqplib';
import { isListening, waitFor } from '../net';
import type { FoundService, ServiceProvider } from '../service';

const run = promisify(execFile);
const LOCAL_URL = 'amqp://guest:guest@127.0.0.1:5672';

/** Resolves true when an AMQP 0-9-1 handshake with `url` succeeds (not just a TCP accept). */
async function answers(url: string): Promise<boolean> {
  try {
    const connection = await connect(url, { timeout: 3000 });
    await connection.close();
    return true;
  } catch {
    return false;
  }
}

async function hasProgram(name: string): Promise<boolean> {
  try {
    await run('sh', ['-c', `command -v ${name}`]);
    return true;
  } catch {
    return false;
  }
}

/**
 * `rabbitmq-server -detached`, waiting up to ~30 s for the AMQP port, and left running afterwards, as
 * `.ci/run` leaves it. This is the machine's broker, on the standard port and with the machine's data
 * directory, not a private one: every Jest run that starts while it is up uses it, including the other run
 * of `npm test` (scripts/jest-each-node.mjs runs two at once) and the runs of other checkouts. Shutting it
 * down at the end of the run that happened to start it broke every run still using it, and the next run to
 * start found it down, started it and shut it down again: on this machine on 2026-11-25 the broker was
 * started and shut down this way ten times between 08:03 and 08:15, failing the RabbitMQ suites of every
 * run in between.
 */
async function startLocal(): Promise<FoundService | undefined> {
  await run('rabbitmq-server', ['-detached']);
  try {
    await waitFor('rabbitmq-server to accept AMQP connections', () => answers(LOCAL_URL), 30_000, 500);
  } catch {
    return undefined;
  }
  return { url: LOCAL_URL, source: 'started', stop: async () => {} };
}

/** A RabbitMQ container, when a Docker engine answers. */
async function startContainer(): Promise<FoundService | { skip: string }> {
  const tc = await import('testcontainers');
  try {
    await tc.getContainerRuntimeClient();
  } catch (error) {
    return { skip: `no Docker engine answers for testcontainers (${(error as Error).message})` };
  }
  const container = await new tc.GenericContainer('rabbitmq:3.13-alpine')
    .withExposedPorts(5672)
    .withWaitStrategy(tc.Wait.forLogMessage(/Server startup complete/))
    .withStartupTimeout(120_000)
    .start();
  const url = `amqp://guest:guest@${container.getHost()}:${container.getMappedPort(5672)}`;
  return {
    url,
    source: 'testcontainers',
    stop: async () => {
      await container.stop();
    },
  };
}

/**
 * RabbitMQ (../README.md): AMQP_URL, else guest/guest on 127.0.0.1:5672, else `rabbitmq-server -detached`
 * when the program exists (waiting up to ~30 s; left running, see `startLocal`), else a testcontainers container when Docker answers, else
 * skipped with the reason.
 */
export const rabbitmqProvider: ServiceProvider = async () => {
  const fromEnv = process.env.AMQP_URL;
  if (fromEnv) {
    if (await answers(fromEnv)) return { url: fromEnv, source: 'env', stop: async () => {} };
    return { skip: `AMQP_URL is set (${fromEnv}) but no AMQP handshake succeeded` };
  }
  if (await isListening(5672)) {
    if (await answers(LOCAL_URL)) return { url: LOCAL_URL, source: 'local', stop: async () => {} };
    return { skip: 'something listens on 127.0.0.1:5672 but refuses an AMQP handshake as guest/guest' };
  }
  if (await hasProgram('rabbitmq-server')) {
    const started = await startLocal().catch(() => undefined);
    if (started) return started;
  }
  try {
    return await startContainer();
  } catch (error) {
    return {
      skip: `no AMQP_URL, nothing answers guest/guest on 127.0.0.1:5672, rabbitmq-server could not be started, and testcontainers failed: ${(error as Error).message}`,
    };
  }
};
