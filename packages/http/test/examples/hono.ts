// The Hono example of packages/http/README.md, verbatim: typechecked with the package's tests.
import { serve } from '@hono/node-server';
import { Idempotency, RedisIdempotencyStore } from '@idempotent-consumer/core';
import { honoIdempotency, type IdempotencyVariables } from '@idempotent-consumer/http/hono';
import { Hono, type MiddlewareHandler } from 'hono';
import { Redis } from 'ioredis';

type Env = { Variables: IdempotencyVariables & { user?: { accountId: string } } };
/** Your authentication middleware: answers 401, or sets `c.var.user` from verified credentials. */
declare const authenticate: MiddlewareHandler<Env>;

const store = new RedisIdempotencyStore({ redis: new Redis() }, { keyPrefix: 'api' });
const idempotency = new Idempotency({ store }, { leaseMs: 30_000 });
const idempotent = honoIdempotency({
  idempotency,
  required: true,
  // The tenant is who authentication says the caller is, never a header or body field the client chooses.
  tenant: (c) => (c.get('user') as { accountId: string } | undefined)?.accountId,
});

const app = new Hono<Env>();
app.post('/orders', authenticate, idempotent, async (c) => {
  // c.get('idempotency'): { key, scope, fencingToken, attempt, outcome, signal }
  const order = {
    id: crypto.randomUUID(),
    ...(await c.req.json()),
    fencingToken: c.get('idempotency')?.fencingToken,
  };
  return c.json(order, 201, { location: `/orders/${order.id}` });
});
serve({ fetch: app.fetch, port: 3000 });
