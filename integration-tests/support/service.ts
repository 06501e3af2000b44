/**
 * How a suite finds a real service (integration-tests/README.md): an explicit URL from the environment, a
 * service already listening on its standard local port, a local program the suite starts itself,
 * testcontainers where a Docker engine answers; otherwise the suite is skipped with the reason.
 *
 * Discovery runs once, in global-setup.ts; it publishes `IC_<NAME>_URL` (found) or `IC_<NAME>_SKIP`
 * (the reason) in the environment the test workers inherit.
 */

/** Services the integration suites use. */
export type ServiceName = 'redis' | 'rabbitmq' | 'kafka' | 'sqs' | 'nats' | 'postgres' | 'mysql';

/** Where a found service came from. */
export type ServiceSource = 'env' | 'local' | 'started' | 'testcontainers';

/** A service a provider found or started. */
export interface FoundService {
  /**
   * Connection string: `redis://…`, `amqp://…`, `host:port,host:port` (Kafka), `http://…` (SQS), `nats://…`,
   * `postgres://…`, `mysql://…`.
   */
  readonly url: string;
  readonly source: ServiceSource;
  /** Stops what the provider started (a no-op for a service it only found). */
  stop(): Promise<void>;
}

/** A provider: finds or starts one service, or says why it cannot. */
export type ServiceProvider = () => Promise<FoundService | { readonly skip: string }>;

const envName = (name: ServiceName, what: 'URL' | 'SKIP') => `IC_${name.toUpperCase()}_${what}`;

/** Publishes a discovery result to the test workers (global-setup only). */
export function publishService(name: ServiceName, result: FoundService | { skip: string }): void {
  if ('skip' in result) {
    process.env[envName(name, 'SKIP')] = result.skip;
    delete process.env[envName(name, 'URL')];
  } else {
    process.env[envName(name, 'URL')] = result.url;
    delete process.env[envName(name, 'SKIP')];
  }
}

/** The URL of a service found by global-setup, or `undefined` with the skip reason. */
export function serviceUrl(name: ServiceName): { url: string } | { skip: string } {
  const url = process.env[envName(name, 'URL')];
  if (url) return { url };
  return {
    skip: process.env[envName(name, 'SKIP')] ?? `${name} was not discovered (is global-setup configured?)`,
  };
}

/**
 * `describe` when every named service was found; otherwise `describe.skip`, with the reason in the title,
 * so the run reports the suite's tests as skipped, never as passed.
 *
 * @example
 * ```ts
 * describeWithServices(['redis', 'rabbitmq'], 'rabbitmq adapter', ({ redis, rabbitmq }) => { it(...) });
 * ```
 */
export function describeWithServices<N extends ServiceName>(
  names: readonly N[],
  title: string,
  body: (urls: Record<N, string>) => void,
): void {
  const urls = {} as Record<N, string>;
  const reasons: string[] = [];
  for (const name of names) {
    const found = serviceUrl(name);
    if ('url' in found) urls[name] = found.url;
    else reasons.push(`${name}: ${found.skip}`);
  }
  if (reasons.length > 0) {
    const why = reasons.join('; ');
    process.stderr.write(`[integration] SKIPPED "${title}": ${why}\n`);
    describe.skip(`${title} [skipped: ${why}]`, () => body(urls));
    return;
  }
  describe(title, () => body(urls));
}
