import type { Idempotency } from '@idempotent-consumer/core';
import { fastifyIdempotency } from '@idempotent-consumer/http/fastify';
import Fastify from 'fastify';
import { urlOf } from './client';
import { type BenchServer, ORDER, raceWork } from './server';

/** A Fastify 5 instance with the two bench routes, with the plugin when `idempotency` is given. */
async function start(name: string, idempotency?: Idempotency): Promise<BenchServer> {
  const app = Fastify();
  const raceRuns = new Map<string, number>();
  if (idempotency) await app.register(fastifyIdempotency, { idempotency });
  app.post('/orders', async (_request, reply) => reply.code(201).send(ORDER));
  app.post('/race', async (request, reply) => {
    await raceWork(raceRuns, request.headers['idempotency-key'] as string | undefined);
    return reply.code(201).send(ORDER);
  });
  await app.listen({ port: 0, host: '127.0.0.1' });
  return { name, framework: 'Fastify', raceRuns, url: urlOf(app.server), close: () => app.close() };
}

/** The bare Fastify routes. */
export const bareFastify = () => start('Fastify, bare route');

/** Fastify with `@idempotent-consumer/http/fastify`. */
export const oursFastify = (idempotency: Idempotency) =>
  start('Fastify + @idempotent-consumer/http', idempotency);
