import { createServer } from 'node:http';
import type { Idempotency } from '@idempotent-consumer/core';
import { createIdempotencyMiddleware, recordIdempotencyError } from '@idempotent-consumer/http/express';
import express from 'express';
import { idempotency as expressIdempotency, getSharedIdempotencyService } from 'express-idempotency';
import RedisAdapter from 'express-idempotency-redis-adapter';
import { listen } from './client';
import { type BenchServer, ORDER, raceWork } from './server';

type Guard = (req: express.Request) => boolean;

/** An Express 5 app with the two bench routes behind `layer` (none: the bare routes). */
async function start(name: string, layer?: express.RequestHandler, replayed?: Guard): Promise<BenchServer> {
  const app = express();
  // Production: Express' error handler does not print the errors a peer passes to next().
  app.set('env', 'production');
  const raceRuns = new Map<string, number>();
  const chain = layer ? [express.json(), layer] : [express.json()];
  app.post('/orders', ...chain, (req, res) => {
    if (replayed?.(req)) return;
    res.status(201).json(ORDER);
  });
  app.post('/race', ...chain, async (req, res) => {
    if (replayed?.(req)) return;
    await raceWork(raceRuns, req.header('idempotency-key'));
    res.status(201).json(ORDER);
  });
  if (layer) app.use(recordIdempotencyError);
  const server = await listen(createServer(app));
  return { name, framework: 'Express', raceRuns, ...server };
}

/** The bare Express routes. */
export const bareExpress = () => start('Express, bare route');

/** Express with `@idempotent-consumer/http/express`. */
export const oursExpress = (idempotency: Idempotency) =>
  start('Express + @idempotent-consumer/http', createIdempotencyMiddleware({ idempotency }));

/**
 * Express with `express-idempotency` on its Redis adapter (node-redis): its middleware calls `next()` for a
 * replay too, and the handler asks `isHit(req)` whether it answered already, as its README says.
 */
export async function expressIdempotencyPeer(redisUrl: string): Promise<BenchServer> {
  // Its records are kept under the keys as sent, which start with the bench's prefix: deleted at the end.
  const adapter = new RedisAdapter({ connectionConfig: { url: redisUrl }, ttl: 600 });
  await adapter.connect();
  const middleware = expressIdempotency({ dataAdapter: adapter });
  const server = await start('Express + express-idempotency (Redis adapter)', middleware, (req) =>
    getSharedIdempotencyService().isHit(req),
  );
  return {
    ...server,
    close: async () => {
      await server.close();
      await adapter.disconnect();
    },
  };
}
