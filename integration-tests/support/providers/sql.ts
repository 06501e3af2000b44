import { isListening, waitFor } from '../net';
import type { FoundService, ServiceProvider } from '../service';

/** How to check that a database answers a query (not just a TCP accept). */
type Probe = (url: string) => Promise<void>;

const probePostgres: Probe = async (url) => {
  const { Client } = await import('pg');
  const client = new Client({ connectionString: url, connectionTimeoutMillis: 3000 });
  try {
    await client.connect();
    await client.query('SELECT 1');
  } finally {
    await client.end().catch(() => {});
  }
};

const probeMysql: Probe = async (url) => {
  const mysql = await import('mysql2/promise');
  const connection = await mysql.createConnection({ uri: url, connectTimeout: 3000 });
  try {
    await connection.query('SELECT 1');
  } finally {
    await connection.end().catch(() => {});
  }
};

/** A database container (image, environment, URL built from host and mapped port). */
interface ContainerSpec {
  readonly image: string;
  readonly environment: Record<string, string>;
  readonly url: (host: string, port: number) => string;
}

/** Starts `spec` through testcontainers when a Docker engine answers, waiting until `probe` succeeds. */
async function startContainer(
  spec: ContainerSpec,
  port: number,
  probe: Probe,
): Promise<FoundService | { skip: string }> {
  const tc = await import('testcontainers');
  try {
    await tc.getContainerRuntimeClient();
  } catch (error) {
    return { skip: `no Docker engine answers for testcontainers (${(error as Error).message})` };
  }
  const container = await new tc.GenericContainer(spec.image)
    .withEnvironment(spec.environment)
    .withExposedPorts(port)
    .withStartupTimeout(120_000)
    .start();
  const url = spec.url(container.getHost(), container.getMappedPort(port));
  try {
    const answers = () =>
      probe(url).then(
        () => true,
        () => false,
      );
    await waitFor(`${spec.image} to answer`, answers, 60_000, 500);
  } catch (error) {
    await container.stop().catch(() => {});
    throw error;
  }
  return { url, source: 'testcontainers', stop: async () => void (await container.stop()) };
}

/**
 * A SQL database provider: the first of `envNames` that is set (it must answer), else `localUrl` when
 * something listens on `port` and answers, else a testcontainers container when Docker answers, else
 * skipped with the reason. The suites create (and drop) their own schema or database inside the one found.
 */
function sqlProvider(
  what: string,
  envNames: readonly string[],
  localUrl: string,
  port: number,
  probe: Probe,
  container: ContainerSpec,
): ServiceProvider {
  return async () => {
    const found = (url: string, source: FoundService['source']): FoundService => ({
      url,
      source,
      stop: async () => {},
    });
    const envName = envNames.find((name) => process.env[name]);
    if (envName) {
      const url = process.env[envName]!;
      try {
        await probe(url);
        return found(url, 'env');
      } catch (error) {
        return { skip: `${envName} is set but ${what} does not answer there: ${(error as Error).message}` };
      }
    }
    if (!(await isListening(port))) {
      try {
        const started = await startContainer(container, port, probe);
        if ('url' in started) return started;
        return {
          skip: `no ${envNames.join('/')}, nothing listens on 127.0.0.1:${port}, and ${started.skip}`,
        };
      } catch (error) {
        return {
          skip: `no ${envNames.join('/')}, nothing listens on 127.0.0.1:${port}, and testcontainers failed: ${(error as Error).message}`,
        };
      }
    }
    try {
      await probe(localUrl);
      return found(localUrl, 'local');
    } catch (error) {
      return { skip: `127.0.0.1:${port} listens but ${localUrl} refuses: ${(error as Error).message}` };
    }
  };
}

/**
 * PostgreSQL: DATABASE_URL or POSTGRES_URL, else `postgres@127.0.0.1:5432/test` (trust auth), else a
 * `postgres:16-alpine` container, else skipped.
 */
export const postgresProvider = sqlProvider(
  'PostgreSQL',
  ['DATABASE_URL', 'POSTGRES_URL'],
  'postgres://postgres@127.0.0.1:5432/test',
  5432,
  probePostgres,
  {
    image: 'postgres:16-alpine',
    environment: { POSTGRES_HOST_AUTH_METHOD: 'trust', POSTGRES_DB: 'test' },
    url: (host, port) => `postgres://postgres@${host}:${port}/test`,
  },
);

/** MySQL/MariaDB: MYSQL_URL, else `root@127.0.0.1:3306/test` (empty password), else a `mariadb:11` container, else skipped. */
export const mysqlProvider = sqlProvider(
  'MySQL',
  ['MYSQL_URL'],
  'mysql://root@127.0.0.1:3306/test',
  3306,
  probeMysql,
  {
    image: 'mariadb:11',
    environment: { MARIADB_ALLOW_EMPTY_ROOT_PASSWORD: '1', MARIADB_DATABASE: 'test' },
    url: (host, port) => `mysql://root@${host}:${port}/test`,
  },
);
