// The Fastify example of packages/http/README.md, verbatim: typechecked with the package's tests.
import { Idempotency, RedisIdempotencyStore } from '@idempotent-consumer/core';
import { fastifyIdempotency } from '@idempotent-consumer/http/fastify';
import Fastify, { type FastifyReply, type FastifyRequest } from 'fastify';
import { Redis } from 'ioredis';

declare module 'fastify' {
  interface FastifyRequest {
    /** Set by your authentication hook from verified credentials (a session, a signed token). */
    user?: { accountId: string };
  }
}
/** Your authentication hook: answers 401, or sets `request.user` from verified credentials. */
declare function authenticate(request: FastifyRequest, reply: FastifyReply): Promise<void>;

async function main() {
  const store = new RedisIdempotencyStore({ redis: new Redis() }, { keyPrefix: 'api' });
  const idempotency = new Idempotency({ store }, { leaseMs: 30_000 });

  const app = Fastify();
  app.decorateRequest('user', undefined);
  app.addHook('onRequest', authenticate); // before every route's preHandler hooks, so before the claim
  await app.register(fastifyIdempotency, {
    idempotency,
    // The tenant is who authentication says the caller is, never a header or body field the client chooses.
    tenant: (request) => request.user?.accountId,
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
