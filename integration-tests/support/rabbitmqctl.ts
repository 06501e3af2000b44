import { execFile, execFileSync } from 'node:child_process';
import { promisify } from 'node:util';

const run = promisify(execFile);

/**
 * Why `rabbitmqctl` cannot manage the broker the suites use, or `undefined` when it can. The broker-forced
 * close tests need it (RabbitMQ 3.10 here has no management plugin, so its HTTP API is not an option); it
 * is found only for a local broker whose Erlang cookie this user can read.
 */
export function rabbitmqctlUnavailable(): string | undefined {
  try {
    execFileSync('rabbitmqctl', ['list_connections', 'pid', '-q'], { stdio: 'ignore', timeout: 20_000 });
    return undefined;
  } catch (error) {
    return `rabbitmqctl cannot list connections (${(error as Error).message.split('\n')[0]})`;
  }
}

/**
 * Closes, from the broker side, the connection whose client property `connection_name` is `name`
 * (`rabbitmqctl close_connection <pid> <explanation>`): RabbitMQ sends `connection.close` with reply code
 * 320 (CONNECTION_FORCED) and the text `CONNECTION_FORCED - <explanation>`.
 * @throws Error when no such connection is listed.
 */
export async function forceCloseConnection(name: string, explanation: string): Promise<void> {
  const { stdout } = await run('rabbitmqctl', ['list_connections', 'pid', 'client_properties', '-q'], {
    timeout: 20_000,
  });
  const line = stdout.split('\n').find((l) => l.includes(`{"connection_name","${name}"}`));
  const pid = line?.split('\t')[0];
  if (!pid) throw new Error(`no RabbitMQ connection named ${name}`);
  await run('rabbitmqctl', ['close_connection', pid, explanation], { timeout: 20_000 });
}
