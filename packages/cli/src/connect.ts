import { redactUrl } from '@idempotent-consumer/core/tools';
import { Cluster, Redis } from 'ioredis';

/** How to reach Redis. A URL, and whether it is a Cluster, where `undefined` asks the server. */
export interface ConnectOptions {
  /** `redis://[user:password@]host:port[/db]` or `rediss://…` for TLS. */
  readonly url: string;
  /** `true` for a Cluster, `false` for standalone, `undefined` for whichever `INFO cluster` reports. */
  readonly cluster?: boolean;
  /** How long a command may take before it fails, in milliseconds. */
  readonly commandTimeoutMs: number;
}

/**
 * Thrown by {@link connect} when `--no-cluster` was given for a server that is a Cluster node. A standalone
 * client there sees one node's records, so `stats` and `list` would count a part of the scope and `purge`
 * would delete a part of it. The CLI exits with status 2, bad usage.
 */
export class NotStandaloneError extends Error {
  override readonly name = 'NotStandaloneError';
}

/**
 * Connects to Redis standalone or Cluster with ioredis. Without `cluster`, it connects standalone first and
 * switches to a `Cluster` client when `INFO cluster` reports `cluster_enabled:1`. The client does not retry a
 * refused connection, so an operator's command fails fast with the error. A database in the URL, as `/db` or
 * `?db=`, that the server refuses is an error too. Out of range is refused, and so is any database but 0 on a
 * Cluster.
 * @throws {@link NotStandaloneError} when `cluster` is `false` and the server is a Cluster node.
 * @throws Error `Cannot reach Redis at …` when the connection, the database selection or `INFO` fails.
 */
export async function connect(options: ConnectOptions): Promise<Redis | Cluster> {
  const common = { commandTimeout: options.commandTimeoutMs, maxRetriesPerRequest: 1, lazyConnect: true };
  const standalone = new Redis(options.url, { ...common, retryStrategy: () => null });
  let lastError: Error | undefined;
  standalone.on('error', (error: Error) => {
    lastError = error; // reported once below, instead of ioredis' unhandled-error lines
  });
  try {
    await standalone.connect();
    // ioredis only emits an 'error' when the SELECT of the URL's database fails, and its commands then run on
    // database 0, so a purge would delete records the operator did not select. Selecting it again here makes
    // the refusal this command's error.
    const db = standalone.options.db;
    if (db !== undefined && String(db) !== '0') await standalone.select(db);
    // Asked unless `cluster: true`, also with `cluster: false`, because one node of a Cluster holds only a
    // part of each scope. A server that refuses INFO to this account is taken at the operator's word.
    let clusterEnabled = options.cluster === true;
    if (options.cluster !== true) {
      const info = standalone.info('cluster');
      clusterEnabled = /^cluster_enabled:1/m.test(
        options.cluster === false ? await info.catch(() => '') : await info,
      );
    }
    if (options.cluster === false && clusterEnabled) {
      standalone.disconnect();
      throw new NotStandaloneError(
        `${redactUrl(options.url)} is a Redis Cluster node (cluster_enabled:1): --no-cluster would read or ` +
          'change the records of that one node only; leave --no-cluster out',
      );
    }
    if (!clusterEnabled) return standalone;
  } catch (error) {
    if (error instanceof NotStandaloneError) throw error;
    // A refused connection has already ended the client, since it does not retry. disconnect() would then
    // wait up to 2 s on a ref'd ioredis timer for a `close` event that came before it, and the CLI would
    // hang.
    if (standalone.status !== 'end') standalone.disconnect();
    const reason = lastError ?? (error as Error);
    throw new Error(`Cannot reach Redis at ${redactUrl(options.url)}: ${reason.message}`, { cause: reason });
  }
  const { host, port } = standalone.options;
  const { username, password, tls } = standalone.options;
  standalone.disconnect();
  const cluster = new Cluster([{ host, port }], {
    redisOptions: { ...common, username, password, tls },
    clusterRetryStrategy: () => null,
    lazyConnect: true,
  });
  cluster.on('error', () => {});
  await cluster.connect();
  return cluster;
}
