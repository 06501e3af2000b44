import {
  IdempotencyAlreadyInProgressError,
  IdempotencyConfig,
  makeIdempotent,
} from '@aws-lambda-powertools/idempotency';
import { CachePersistenceLayer } from '@aws-lambda-powertools/idempotency/cache';
import { createClient } from '@redis/client';
import { BUSY, type Contender, LEASE_MS, RETENTION_MS } from '../contender';
import { redisUrl } from '../redis';

/** The event each call passes: the idempotency key (`eventKeyJmesPath: 'id'`) and the work to run. */
interface BenchEvent {
  readonly id: string;
  readonly run: () => Promise<unknown>;
}

/** A Lambda context as Powertools reads it (`getRemainingTimeInMillis` bounds the in-progress window). */
const lambdaContext = (remainingMs: number) => ({
  functionName: 'bench',
  awsRequestId: 'bench',
  getRemainingTimeInMillis: () => remainingMs,
});

/** Settings of one Powertools contender. */
export interface PowertoolsSettings {
  /** Pass a Lambda-style context whose remaining time is this many ms (the in-progress expiry), or none. */
  readonly lambdaRemainingMs?: number;
  /** `expiresAfterSeconds` of the record (Powertools' retention). */
  readonly expiresAfterSeconds?: number;
}

/**
 * Powertools for AWS Lambda's idempotency utility (`@aws-lambda-powertools/idempotency`) as a long-running
 * consumer uses it: `makeIdempotent` around an async function, `CachePersistenceLayer` on a node-redis
 * (`@redis/client`) connection, the idempotency key taken from the event with `eventKeyJmesPath`.
 * Without a Lambda context an in-progress record has no in-progress expiry (it blocks its key until
 * `expiresAfterSeconds`); with one, the remaining time bounds it.
 */
export async function powertools(prefix: string, settings: PowertoolsSettings = {}): Promise<Contender> {
  const client = createClient({ url: redisUrl });
  await client.connect();
  const persistenceStore = new CachePersistenceLayer({ client });
  const config = new IdempotencyConfig({
    eventKeyJmesPath: 'id',
    expiresAfterSeconds: settings.expiresAfterSeconds ?? RETENTION_MS / 1000,
  });
  const withContext = settings.lambdaRemainingMs !== undefined;
  const context = lambdaContext(settings.lambdaRemainingMs ?? LEASE_MS);
  const fn = makeIdempotent(async (event: BenchEvent, _context?: unknown) => event.run(), {
    persistenceStore,
    config,
    keyPrefix: prefix,
  });
  return {
    name: `Powertools makeIdempotent + CachePersistenceLayer, ${withContext ? 'Lambda context' : 'no context'}`,
    async process(key, handler) {
      const event: BenchEvent = { id: key, run: handler };
      try {
        return await (withContext ? fn(event, context) : fn(event));
      } catch (error) {
        if (error instanceof IdempotencyAlreadyInProgressError) return BUSY;
        throw error;
      }
    },
    async close() {
      await client.quit();
    },
  };
}
