import type { FoundService } from './service';

/** The part of fauxqs's `buildApp` result (a Fastify instance) the suites use. */
interface FauxqsApp {
  listen(options: { port: number; host: string }): Promise<string>;
  close(): Promise<unknown>;
}

type FauxqsModule = { buildApp(options: { logger?: boolean }): FauxqsApp };

/**
 * A real ES-module `import()`. fauxqs is ESM-only (its `exports` has no `require` condition), and the jest
 * transform rewrites a literal `import()` into `require()`, so the specifier goes through a function the
 * transform does not see. Only used in global-setup, which runs in Jest's own Node context.
 */
const importEsm = new Function('specifier', 'return import(specifier)') as (s: string) => Promise<unknown>;

/**
 * Starts the fauxqs SQS emulator (npm `fauxqs`) in this process on a free port of 127.0.0.1 and returns
 * its endpoint (`http://127.0.0.1:<port>`). It uses `buildApp` and listens itself, because `startFauxqs`
 * always listens on every interface. Clients must use `useQueueUrlAsEndpoint: false` (see
 * `sqs-helpers.ts`), because fauxqs's queue URLs name the host `sqs.<region>.localhost`.
 */
export async function startSqsEmulator(): Promise<FoundService> {
  const { buildApp } = (await importEsm('fauxqs')) as FauxqsModule;
  const app = buildApp({ logger: false });
  const address = await app.listen({ port: 0, host: '127.0.0.1' });
  return {
    url: address.replace('localhost', '127.0.0.1'),
    source: 'started',
    stop: async () => {
      await app.close();
    },
  };
}
