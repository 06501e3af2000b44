// The Fastify example of packages/http/README.md, verbatim: typechecked with the package's tests.
import { Idempotency, RedisIdempotencyStore } from '@idempotent-consumer/core';
import { fastifyIdempotency } from '@idempotent-consumer/http/fastify';
import Fastify from 'fastify';
import { Redis } from 'ioredis';

async function main() {
  const store = new RedisIdempotencyStore({ redis: new Redis() }, { keyPrefix: 'api' });
  const idempotency = new Idempotency({ store }, { leaseMs: 30_000 });

  const app = Fastify();
  await app.register(fastifyIdempotency, {
    idempotency,
    tenant: (request) => request.headers['x-account-id'] as string | undefined,
  });
  app.post('/orders', { config: { idempotency: { required: true } } }, async (request, reply) => {
    // request.idempotency: { key, scope, fencingToken, attempt, outcome, signal }
    const order = {
      id: crypto.randomUUID(),
      ...(request.body as object),
      fencingToken: request.idempotency?.fencingToken,
    };
    return reply.code(201).header('location', `/orders/${order.id}`).send(order);
  });
  app.post('/search', { config: { idempotency: false } }, async () => ({ results: [] }));
  await app.listen({ port: 3000, host: '127.0.0.1' });
}
void main();
