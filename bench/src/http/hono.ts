import type { Server } from 'node:http';
import { createAdaptorServer } from '@hono/node-server';
import type { Idempotency } from '@idempotent-consumer/core';
import { honoIdempotency } from '@idempotent-consumer/http/hono';
import { type Context, Hono, type MiddlewareHandler } from 'hono';
import { listen } from './client';
import { type BenchServer, ORDER, raceWork } from './server';

/** A Hono app on `@hono/node-server` with the two bench routes, behind `layer` when given. */
async function start(name: string, layer?: MiddlewareHandler): Promise<BenchServer> {
  const app = new Hono();
  const raceRuns = new Map<string, number>();
  const route = (path: string, handler: (c: Context) => Promise<Response>) =>
    layer ? app.post(path, layer, handler) : app.post(path, handler);
  // The handler reads the JSON body as an application's would.
  route('/orders', async (c) => {
    await c.req.json();
    return c.json(ORDER, 201);
  });
  route('/race', async (c) => {
    await c.req.json();
    await raceWork(raceRuns, c.req.header('idempotency-key'));
    return c.json(ORDER, 201);
  });
  const server = await listen(createAdaptorServer({ fetch: app.fetch }) as Server);
  return { name, framework: 'Hono', raceRuns, ...server };
}

/** The bare Hono routes. */
export const bareHono = () => start('Hono, bare route');

/** Hono with `@idempotent-consumer/http/hono`. */
export const oursHono = (idempotency: Idempotency) =>
  start('Hono + @idempotent-consumer/http', honoIdempotency({ idempotency }));
